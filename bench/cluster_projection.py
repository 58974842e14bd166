#!/usr/bin/python3
"""Project a model selection's epoch time on N nodes from what bench/cluster.sh measured.

  /usr/bin/python3 bench/cluster_projection.py MEASURED.tsv [options]
  /usr/bin/python3 bench/cluster_projection.py --hop-bytes B --buffer-bytes D \\
      --partition-seconds S --partitions P --configs C [--outside-seconds V] [options]

MEASURED.tsv is the file bench/cluster.sh writes: a comment line with
partitions=P, buffer_bytes=D and outside_visits_s=V (optional: epochs,
two_nodes_s), then one row per configuration: id, architecture, optimizer,
batch, blob bytes (weights + optimizer state, as the model hops), seconds of
one epoch on one core here, and across the nodes.  Without a file, the
aggregates do: B = hop bytes per epoch (sum over configurations of 2 x blob x
P), D = buffer bytes, S = seconds of one sub-epoch summed over the C
configurations (their sizes taken as equal), V as below.

What it assumes (per epoch; every configuration visits every partition once):
  - Strong scaling: the same packed table cut into N partitions, one per
    node, one worker per node (workers_per_node => 1); every node one core as
    fast as the one that measured; a configuration's compute is proportional to
    its examples, so its epoch T_c (P x its measured sub-epoch) is shared by the
    N nodes.
  - compute(N) = max(sum T_c / N, max T_c): a model trains on one node at a
    time, so no epoch is shorter than the heaviest configuration's epoch on one
    core, however many nodes.  Scheduling is taken as perfect: no node waits
    for a model while another has two queued (the check at N = 2 at the end
    says how far the measured run was from the model).
  - Hops as pgdl makes them: the coordinator's worker for a node sends the
    blob to the node and gets it back (pgdl.train_partitions), so every hop
    crosses the coordinator's link.  Links are full duplex at L bit/s, of which
    a fraction E carries payload (TCP/IP and libpq framing); each visit costs a
    latency H (round trip and query start), and the protocol's copies at both
    ends move R bytes/s (a libpq round trip of a 6.4 MB bytea, SELECT $1::bytea
    over a unix socket, took 21-29 ms here: R = 0.6 GB/s).
      hop_coord(N) = N x sum b_c x 8 / (E L): the coordinator's link, each way
                     (every model to every node and back, each epoch);
      hop_node     = 2 x sum b_c x (8 / (E L) + 1 / R) + C x H: one node's own
                     models in and then out, one after the other.
  - V: the seconds one server spends per epoch outside visits (validation of
    every model, checkpoints, loading partitions): in a cluster, the
    coordinator's worker of the node where a model's epoch ended does it while
    that node waits: V / N per node when the epochs end evenly on the nodes.
  - overlapped (best case: a hop or a validation hides behind another model's
    compute, e.g. a second worker per node, or a worker that sends the next
    model before it validates the last one):
      epoch(N) = max(compute(N), hop_coord(N))
  - not overlapped (pgdl today with one worker per node):
      epoch(N) = max(compute(N) + hop_node + V / N, hop_coord(N))
  - Hops dominate from the smallest N at which hop_coord(N) >= compute(N):
    the coordinator's link is then busier than the nodes' cores, and more
    nodes make epochs longer.  Also given: the same without the floor of the
    longest configuration (a selection with configurations enough to keep
    every node busy), and for each architecture alone.
  - For comparison, moving the data instead of the models: the packed table's
    D bytes across one link, D x 8 / (E L) per epoch.
"""

import argparse
import math
import sys


def read_measured(path):
    """The comment line's key=value pairs, and [(architecture, blob bytes, epoch seconds on one core)]."""
    meta = {}
    configs = []
    with open(path) as f:
        for line in f:
            line = line.rstrip('\n')
            if not line:
                continue
            if line.startswith('#'):
                for word in line[1:].split():
                    key, eq, value = word.partition('=')
                    if eq:
                        meta[key] = value
                continue
            cols = line.split('\t')
            if len(cols) < 6:
                sys.exit('%s: a row needs at least 6 tab-separated columns: %r' % (path, line))
            configs.append((cols[1], float(cols[4]), float(cols[5])))
    for key in ('partitions', 'buffer_bytes'):
        if key not in meta:
            sys.exit('%s: no comment line with %s=' % (path, key))
    if not configs:
        sys.exit('%s: no configurations' % path)
    return meta, configs


def from_aggregates(args):
    for name in ('hop_bytes', 'buffer_bytes', 'partition_seconds', 'partitions', 'configs'):
        if getattr(args, name) is None:
            sys.exit('without a measured file, --%s is needed' % name.replace('_', '-'))
    p, c = args.partitions, args.configs
    blob = args.hop_bytes / (2.0 * p) / c
    epoch = args.partition_seconds * p / c
    meta = {'partitions': p, 'buffer_bytes': args.buffer_bytes}
    return meta, [('', blob, epoch) for _ in range(c)]


class Projection:
    def __init__(self, configs, outside_s, args):
        self.blobs = sum(b for _, b, _ in configs)
        self.work = sum(t for _, _, t in configs)
        self.longest = max(t for _, _, t in configs)
        self.n_configs = len(configs)
        self.outside_s = outside_s
        self.efficiency = args.efficiency
        self.latency_s = args.latency_ms / 1000
        self.copy_rate = args.copy_gbytes * 1e9

    def wire(self, nbytes, gbit):
        return nbytes * 8 / (self.efficiency * gbit * 1e9)

    def compute(self, n, floor=True):
        return max(self.work / n, self.longest if floor else 0)

    def hop_coord(self, n, gbit):
        return self.wire(n * self.blobs, gbit)

    def hop_node(self, gbit):
        copies = 2 * self.blobs / self.copy_rate
        return self.wire(2 * self.blobs, gbit) + copies + self.n_configs * self.latency_s

    def overlapped(self, n, gbit):
        return max(self.compute(n), self.hop_coord(n, gbit))

    def not_overlapped(self, n, gbit):
        return max(self.compute(n) + self.hop_node(gbit) + self.outside_s / n, self.hop_coord(n, gbit))

    def dominate_from(self, gbit, floor=True, limit=1 << 20):
        for n in range(1, limit):
            if self.hop_coord(n, gbit) >= self.compute(n, floor):
                return n
        return None


def dominate_text(pr, gbit, floor=True):
    n = pr.dominate_from(gbit, floor)
    return str(n) if n else 'no count below 2^20'


def print_check(pr, meta):
    """The model at the measured 2 nodes (a unix socket: no wire time) against the measured run."""
    if 'two_nodes_s' not in meta or 'epochs' not in meta:
        return
    predicted = pr.compute(2) + 2 * pr.blobs / pr.copy_rate + pr.n_configs * pr.latency_s + pr.outside_s / 2
    measured = float(meta['two_nodes_s']) / int(meta['epochs'])
    print('check at the measured 2 nodes (no wire: one machine): %.1f s per epoch not overlapped, measured %.1f s'
          ' (x%.2f: what perfect scheduling and the model leave out)'
          % (predicted, measured, measured / predicted))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('measured', nargs='?', help='the file bench/cluster.sh writes')
    ap.add_argument('--hop-bytes', type=float, help='hop bytes per epoch (2 x blobs x partitions)')
    ap.add_argument('--buffer-bytes', type=float, help='bytes of the packed table (x and y)')
    ap.add_argument('--partition-seconds', type=float, help='one sub-epoch, summed over configurations')
    ap.add_argument('--partitions', type=int, help='partitions the measurement had')
    ap.add_argument('--configs', type=int, help='configurations the measurement had')
    ap.add_argument('--outside-seconds', type=float, help='per epoch, one server outside visits (default: the'
                    ' file\'s outside_visits_s, else 0)')
    ap.add_argument('--nodes', default='4,8,32', help='node counts (default 4,8,32)')
    ap.add_argument('--links', default='1,10', help='link rates in Gbit/s (default 1,10)')
    ap.add_argument('--efficiency', type=float, default=0.9, help='payload fraction of a link (default 0.9)')
    ap.add_argument('--latency-ms', type=float, default=0.5, help='per hop: round trip and query start (default 0.5)')
    ap.add_argument('--copy-gbytes', type=float, default=0.6,
                    help='GB/s the protocol\'s copies move a blob there and back (default 0.6, measured here)')
    args = ap.parse_args()

    meta, configs = read_measured(args.measured) if args.measured else from_aggregates(args)
    partitions, buffer_bytes = int(meta['partitions']), float(meta['buffer_bytes'])
    outside_s = args.outside_seconds if args.outside_seconds is not None else float(meta.get('outside_visits_s', 0))
    nodes = [int(n) for n in args.nodes.split(',')]
    links = [float(g) for g in args.links.split(',')]
    if (min(nodes) < 1 or min(links) <= 0 or not 0 < args.efficiency <= 1 or args.latency_ms < 0
            or args.copy_gbytes <= 0 or outside_s < 0):
        sys.exit('nodes >= 1, links > 0, 0 < efficiency <= 1, latency >= 0, copy rate > 0 and outside >= 0, please')
    pr = Projection(configs, outside_s, args)

    print('measured: %d configurations, %d partitions; blobs %.1f MB in all (hop bytes per epoch %.0f);'
          ' buffers %.1f MB; one epoch of every configuration on one core %.1f s (longest %.1f s);'
          ' outside visits %.1f s per epoch'
          % (pr.n_configs, partitions, pr.blobs / 1e6, 2 * pr.blobs * partitions, buffer_bytes / 1e6,
             pr.work, pr.longest, outside_s))
    print('assumed: one partition and one worker per node, each node one core as fast as here; perfect'
          ' scheduling; every hop through the coordinator (to the node and back); full-duplex links, %.0f%%'
          ' payload; %.1f ms per hop; protocol copies %.1f GB/s; validation and checkpoints on the coordinator'
          ' while the node waits (not overlapped), or hidden (overlapped)'
          % (100 * args.efficiency, args.latency_ms, args.copy_gbytes))
    print('%6s %6s %10s %12s %12s %10s %14s %14s %14s'
          % ('nodes', 'Gbit/s', 'compute s', 'hop bytes', 'coord link s', 'node hop s',
             'epoch overlap', 'epoch serial', 'buffers once s'))
    for gbit in links:
        for n in nodes:
            print('%6d %6g %10.2f %12.0f %12.2f %10.3f %14.2f %14.2f %14.2f'
                  % (n, gbit, pr.compute(n), 2 * n * pr.blobs, pr.hop_coord(n, gbit), pr.hop_node(gbit),
                     pr.overlapped(n, gbit), pr.not_overlapped(n, gbit), pr.wire(buffer_bytes, gbit)))
    print('compute stops shrinking at %d nodes: no epoch is shorter than the longest configuration\'s (%.1f s)'
          % (math.ceil(pr.work / pr.longest - 1e-9), pr.longest))
    groups = {}
    for config in configs:
        groups.setdefault(config[0], []).append(config)
    for gbit in links:
        parts = ['%s alone from %s' % (arch, dominate_text(Projection(cs, 0, args), gbit))
                 for arch, cs in sorted(groups.items())] if len(groups) > 1 else []
        print('%g Gbit/s: hops dominate from %s nodes (the coordinator\'s link busier than the nodes\' cores;'
              ' with configurations enough to keep every node busy: from %s)%s'
              % (gbit, dominate_text(pr, gbit), dominate_text(pr, gbit, floor=False),
                 '; ' + ', '.join(parts) if parts else ''))
    print_check(pr, meta)


if __name__ == '__main__':
    main()
