/*
 * attribution.c -- explanations: the gradient of one output of the network
 * with respect to its input, and integrated gradients (Sundararajan et al.,
 * 2017) along a straight path from a baseline.
 *
 * What is differentiated is the inference-mode network, the one pgdl.predict
 * runs: dropout passes everything, batch normalization uses its running
 * statistics (m->infer_grad makes backward follow that forward).  The forward
 * pass runs the whole batch at once (not inference's sub-batches, which keep
 * only the last layer's outputs), so backward finds every layer's output.
 * The model's parameters, running statistics, optimizer state and step are
 * left as they were; its parameter gradients are scratch (each training step
 * writes them anew) and its workspace gains the input's gradient.
 *
 * The path integral is Gauss-Legendre quadrature over `steps` points (as
 * Captum's default): exact for a polynomial of degree 2 steps - 1 along the
 * path, so a smooth network's attributions sum to f(x) - f(b) far closer than
 * the midpoint rule's at the same cost; one point is the midpoint.
 *
 * An id read by an embedding has no gradient: a straight path over ids
 * crosses ids that mean nothing.  Such a column's path runs in the
 * embedding's output space instead, from the baseline's vectors to x's, and
 * its attribution is the sum over its vector's dimensions: per id, so per
 * token of a sequence.  The completeness of integrated gradients holds for
 * that path too, since its ends are the network at the baseline and at x.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "nn_internal.h"

/* Path points per forward and backward pass: the workspace a call reserves. */
#define NN_EXPLAIN_CHUNK	64

/* An embedding that reads input columns [from, from + count): its output per example is `size` floats. */
typedef struct ExplainEmbedding
{
	int			layer;
	int64_t		from;
	int64_t		count;
	int64_t		size;
	float	   *ex;				/* its output for x, host memory */
	float	   *eb;				/* for the baseline */
} ExplainEmbedding;

typedef struct Explain
{
	NnModel    *m;
	int32_t		output;
	NnExplainTarget target;
	int			n_emb;
	ExplainEmbedding emb[NN_MAX_LAYERS];
	float	   *z;				/* host: a batch's outputs */
	float	   *dz;				/* host: df/dz of a batch */
	float	   *path;			/* host: a batch's inputs */
	float	   *grad;			/* host: a batch's gradients, input then each embedding's output */
	double	   *sum;			/* the gradients summed over the path, the same layout */
	int64_t		grad_size;		/* floats of one example's gradient in `grad` */
} Explain;

bool
nn_explain_target_valid(const NnModel *m, int32_t output, NnExplainTarget target, NnError *err)
{
	int64_t		k = nn_model_output_size(m);

	if (output < 0 || output >= k)
	{
		nn_error_set(err, -1, "output", "output %d is not one of the model's %lld outputs", (int) output,
					 (long long) k);
		return false;
	}
	if (target == NN_EXPLAIN_PROBABILITY && nn_loss_is_regression(m->spec.loss))
	{
		nn_error_set(err, -1, "target", "a model with loss %s has no probabilities", nn_loss_name(m->spec.loss));
		return false;
	}
	return true;
}

/*
 * f of one example's outputs z and df/dz into dz (host memory): the output
 * itself, or a probability (softmax over the outputs for cross_entropy, the
 * output's sigmoid for binary_cross_entropy), in double.
 */
static double
target_value(const Explain *e, const float *z, float *dz)
{
	int64_t		k = nn_model_output_size(e->m);
	int			o = e->output;
	double		p;

	for (int64_t j = 0; j < k; j++)
		dz[j] = 0.0f;
	if (e->target == NN_EXPLAIN_OUTPUT)
	{
		dz[o] = 1.0f;
		return z[o];
	}
	if (e->m->spec.loss == NN_LOSS_BCE)
	{
		p = 1.0 / (1.0 + exp(-(double) z[o]));
		dz[o] = (float) (p * (1.0 - p));
		return p;
	}
	else
	{
		double		max = z[0],
					sum = 0.0;

		for (int64_t j = 1; j < k; j++)
			max = z[j] > max ? z[j] : max;
		for (int64_t j = 0; j < k; j++)
			sum += exp((double) z[j] - max);
		p = exp((double) z[o] - max) / sum;
		/* d p_o / d z_j = p_o (delta_oj - p_j) */
		for (int64_t j = 0; j < k; j++)
			dz[j] = (float) (-p * exp((double) z[j] - max) / sum);
		dz[o] = (float) (p * (1.0 - p));
		return p;
	}
}

/* The embeddings that read input columns, each with room for its two vectors. */
static bool
explain_begin(Explain *e, NnModel *m, int32_t output, NnExplainTarget target, int32_t batch, NnError *err)
{
	int64_t		in = nn_model_input_size(m),
				k = nn_model_output_size(m);

	memset(e, 0, sizeof(Explain));
	e->m = m;
	e->output = output;
	e->target = target;
	if (!m->be->host_memory)
	{
		nn_error_set(err, -1, "device", "explanations run on the CPU; this model is on %s", m->be->name);
		return false;
	}
	if (!nn_explain_target_valid(m, output, target, err))
		return false;
	e->grad_size = in;
	for (int i = 0; i < m->spec.n_layers; i++)
	{
		ExplainEmbedding *x = &e->emb[e->n_emb];

		if (m->spec.layers[i].type != NN_EMBEDDING || !nn_input_columns(&m->spec, i, &x->from, &x->count))
			continue;
		x->layer = i;
		x->size = NN_SHAPE_SIZE(m->shape[i + 1]);
		x->ex = malloc(sizeof(float) * 2 * x->size);
		if (x->ex == NULL)
			goto oom;
		x->eb = x->ex + x->size;
		e->grad_size += x->size;
		e->n_emb++;
	}
	e->z = malloc(sizeof(float) * batch * k);
	e->dz = malloc(sizeof(float) * batch * k);
	e->path = malloc(sizeof(float) * batch * in);
	e->grad = malloc(sizeof(float) * batch * e->grad_size);
	e->sum = calloc(e->grad_size, sizeof(double));
	if (e->z == NULL || e->dz == NULL || e->path == NULL || e->grad == NULL || e->sum == NULL)
		goto oom;
	m->want_dinput = true;
	return nn_model_reserve(m, batch, err);
oom:
	nn_error_set(err, -1, "", "out of memory for an explanation");
	return false;
}

static void
explain_end(Explain *e)
{
	for (int i = 0; i < e->n_emb; i++)
		free(e->emb[i].ex);
	free(e->z);
	free(e->dz);
	free(e->path);
	free(e->grad);
	free(e->sum);
}

/*
 * The inference-mode forward pass of n examples x, whole, with each input
 * embedding's output replaced, when alpha is not NULL, by eb + alpha[r] (ex -
 * eb) for example r; the outputs into e->z.
 */
static void
explain_forward(Explain *e, const float *x, int32_t n, const double *alpha)
{
	NnModel    *m = e->m;
	int			from = 0;
	int64_t		k = nn_model_output_size(m);

	for (int i = 0; i < e->n_emb && alpha != NULL; i++)
	{
		ExplainEmbedding *x_emb = &e->emb[i];
		float	   *row = e->grad;	/* scratch until backward */

		nn_forward_layers(m, x, n, from, x_emb->layer + 1, false);
		for (int32_t r = 0; r < n; r++)
		{
			for (int64_t d = 0; d < x_emb->size; d++)
				row[d] = x_emb->eb[d] + (float) alpha[r] * (x_emb->ex[d] - x_emb->eb[d]);
			m->be->upload(m->out[x_emb->layer] + r * x_emb->size, row, sizeof(float) * x_emb->size);
		}
		from = x_emb->layer + 1;
	}
	nn_forward_layers(m, x, n, from, m->spec.n_layers, false);
	m->be->download(e->z, m->out[m->spec.n_layers - 1], sizeof(float) * n * k);
}

/* After explain_forward: f of each example into f (may be NULL), and its gradient into e->grad. */
static void
explain_backward(Explain *e, int32_t n, double *f)
{
	NnModel    *m = e->m;
	int64_t		k = nn_model_output_size(m),
				in = nn_model_input_size(m);

	for (int32_t r = 0; r < n; r++)
	{
		double		v = target_value(e, e->z + r * k, e->dz + r * k);

		if (f != NULL)
			f[r] = v;
	}
	m->be->upload(m->dout[m->spec.n_layers - 1], e->dz, sizeof(float) * n * k);
	m->infer_grad = true;
	nn_backward_layers(m, 0, m->spec.n_layers);
	m->infer_grad = false;
	for (int32_t r = 0; r < n; r++)
	{
		float	   *g = e->grad + r * e->grad_size;

		m->be->download(g, m->dinput + r * in, sizeof(float) * in);
		g += in;
		for (int i = 0; i < e->n_emb; i++)
		{
			m->be->download(g, m->dout[e->emb[i].layer] + r * e->emb[i].size, sizeof(float) * e->emb[i].size);
			g += e->emb[i].size;
		}
	}
}

bool
nn_model_input_gradient(NnModel *m, const float *x, int32_t n, int32_t output, NnExplainTarget target,
						float *f, float *grad, NnError *err)
{
	Explain		e;
	unsigned int fp;
	int64_t		in = nn_model_input_size(m);
	bool		ok;

	if (n < 1 || n > NN_MAX_BATCH)
	{
		nn_error_set(err, -1, "n", "between 1 and %d examples, got %d", NN_MAX_BATCH, (int) n);
		return false;
	}
	ok = explain_begin(&e, m, output, target, n, err) && nn_model_check_input(m, x, n, err);
	if (ok)
	{
		double	   *fd = malloc(sizeof(double) * n);

		if (fd == NULL)
		{
			explain_end(&e);
			nn_error_set(err, -1, "", "out of memory for an explanation");
			return false;
		}
		fp = nn_fp_enter();
		explain_forward(&e, x, n, NULL);
		explain_backward(&e, n, fd);
		nn_fp_leave(fp);
		for (int32_t r = 0; r < n; r++)
		{
			if (f != NULL)
				f[r] = (float) fd[r];
			memcpy(grad + r * in, e.grad + r * e.grad_size, sizeof(float) * in);
		}
		free(fd);
	}
	explain_end(&e);
	return ok;
}

/*
 * Each input embedding's vectors of x and of the baseline b (one inference
 * pass of the two), and f at both.
 */
static void
explain_ends(Explain *e, const float *x, const float *b, double *fx, double *fb)
{
	NnModel    *m = e->m;
	int64_t		in = nn_model_input_size(m),
				k = nn_model_output_size(m);
	int			from = 0;

	memcpy(e->path, x, sizeof(float) * in);
	memcpy(e->path + in, b, sizeof(float) * in);
	for (int i = 0; i < e->n_emb; i++)
	{
		ExplainEmbedding *x_emb = &e->emb[i];

		/* before a later layer may run in place over it */
		nn_forward_layers(m, e->path, 2, from, x_emb->layer + 1, false);
		m->be->download(x_emb->ex, m->out[x_emb->layer], sizeof(float) * x_emb->size);
		m->be->download(x_emb->eb, m->out[x_emb->layer] + x_emb->size, sizeof(float) * x_emb->size);
		from = x_emb->layer + 1;
	}
	nn_forward_layers(m, e->path, 2, from, m->spec.n_layers, false);
	m->be->download(e->z, m->out[m->spec.n_layers - 1], sizeof(float) * 2 * k);
	*fx = target_value(e, e->z, e->dz);
	*fb = target_value(e, e->z + k, e->dz);
}

/*
 * Gauss-Legendre's n points t[k] of [0, 1] and their weights w[k] (summing to
 * 1): the roots of the Legendre polynomial P_n by Newton's method from
 * Tricomi's estimate, in increasing order.
 */
static void
gauss_legendre(int32_t n, double *t, double *w)
{
	for (int32_t i = 0; i < (n + 1) / 2; i++)
	{
		double		z = cos(M_PI * (i + 0.75) / (n + 0.5)),
					dp = 1.0;

		for (int iter = 0; iter < 100; iter++)
		{
			double		p0 = 1.0,
						p1 = 0.0,
						z0 = z;

			/* P_n(z) by the three-term recurrence; p1 ends as P_{n-1} */
			for (int32_t j = 1; j <= n; j++)
			{
				double		p2 = p1;

				p1 = p0;
				p0 = ((2.0 * j - 1.0) * z * p1 - (j - 1.0) * p2) / j;
			}
			dp = n * (z * p0 - p1) / (z * z - 1.0);
			z = z0 - p0 / dp;
			if (fabs(z - z0) <= 1e-15)
				break;
		}
		t[i] = 0.5 * (1.0 - z);
		t[n - 1 - i] = 0.5 * (1.0 + z);
		w[i] = w[n - 1 - i] = 1.0 / ((1.0 - z * z) * dp * dp);
	}
}

/* The weighted sum of the gradients over the path (e->sum) times each column's change: the attributions. */
static void
explain_attributions(const Explain *e, const float *x, const float *b, float *attr)
{
	int64_t		in = nn_model_input_size(e->m);
	const double *g = e->sum + in;

	for (int64_t j = 0; j < in; j++)
		attr[j] = (float) (((double) x[j] - (double) b[j]) * e->sum[j]);
	for (int i = 0; i < e->n_emb; i++)
	{
		const ExplainEmbedding *x_emb = &e->emb[i];
		int64_t		per_id = x_emb->size / x_emb->count;

		/* step p of the embedding's output is the vector of column from + p */
		for (int64_t p = 0; p < x_emb->count; p++)
		{
			double		a = 0.0;

			for (int64_t d = p * per_id; d < (p + 1) * per_id; d++)
				a += ((double) x_emb->ex[d] - (double) x_emb->eb[d]) * g[d];
			attr[x_emb->from + p] = (float) a;
		}
		g += x_emb->size;
	}
}

bool
nn_model_integrated_gradients(NnModel *m, const float *x, const float *b, int32_t steps, int32_t output,
							  NnExplainTarget target, float *attr, double *fx, double *fb, NnError *err)
{
	Explain		e;
	int32_t		chunk = steps < NN_EXPLAIN_CHUNK ? steps : NN_EXPLAIN_CHUNK;
	int64_t		in = nn_model_input_size(m);
	double	   *t,
			   *w;
	unsigned int fp;

	if (steps < 1 || steps > NN_MAX_EXPLAIN_STEPS)
	{
		nn_error_set(err, -1, "steps", "steps must be between 1 and %d, got %d", NN_MAX_EXPLAIN_STEPS, (int) steps);
		return false;
	}
	if ((t = malloc(sizeof(double) * 2 * steps)) == NULL)
	{
		nn_error_set(err, -1, "", "out of memory for an explanation");
		return false;
	}
	if (!explain_begin(&e, m, output, target, chunk < 2 ? 2 : chunk, err) ||
		!nn_model_check_input(m, x, 1, err) || !nn_model_check_input(m, b, 1, err))
	{
		free(t);
		explain_end(&e);
		return false;
	}
	w = t + steps;
	gauss_legendre(steps, t, w);
	fp = nn_fp_enter();
	explain_ends(&e, x, b, fx, fb);
	for (int32_t s0 = 0; s0 < steps; s0 += chunk)
	{
		int32_t		c = steps - s0 < chunk ? steps - s0 : chunk;

		for (int32_t r = 0; r < c; r++)
		{
			for (int64_t j = 0; j < in; j++)
				e.path[r * in + j] = (float) (b[j] + t[s0 + r] * ((double) x[j] - b[j]));
			for (int i = 0; i < e.n_emb; i++)	/* valid ids: the embedding's output is replaced */
				memcpy(e.path + r * in + e.emb[i].from, x + e.emb[i].from, sizeof(float) * e.emb[i].count);
		}
		explain_forward(&e, e.path, c, t + s0);
		explain_backward(&e, c, NULL);
		for (int32_t r = 0; r < c; r++)
			for (int64_t j = 0; j < e.grad_size; j++)
				e.sum[j] += w[s0 + r] * e.grad[r * e.grad_size + j];
	}
	nn_fp_leave(fp);
	explain_attributions(&e, x, b, attr);
	explain_end(&e);
	free(t);
	return true;
}
