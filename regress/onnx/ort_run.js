// Runs an ONNX model with onnxruntime-node, the independent runtime pgdl's exports are checked against
// (regress/onnx/test_export.py).
//
//   node ort_run.js MODEL.onnx INPUT.f32 DIMS OUTPUT.f32
//
// INPUT.f32 holds float32 values (little-endian) of shape DIMS ("1000,1,28,28"), fed to the graph's only
// input; OUTPUT.f32 receives the graph's only output as float32, row-major.
'use strict';

const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
	const [modelPath, inputPath, dimsText, outputPath] = process.argv.slice(2);
	if (!outputPath) {
		throw new Error('usage: node ort_run.js MODEL.onnx INPUT.f32 DIMS OUTPUT.f32');
	}
	const dims = dimsText.split(',').map(Number);
	const bytes = fs.readFileSync(inputPath);
	const x = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
	const session = await ort.InferenceSession.create(modelPath);
	const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', Float32Array.from(x), dims) };
	const results = await session.run(feeds);
	const y = results[session.outputNames[0]];
	fs.writeFileSync(outputPath, Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength));
	process.stdout.write(JSON.stringify({ dims: y.dims }) + '\n');
}

main().catch((e) => {
	process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
	process.exit(1);
});
