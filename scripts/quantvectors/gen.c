// gen.c writes internal/engine/tensor/testdata/ggml-quant-vectors.gguf:
// quantization, dequantization and dot-product vectors for the quant types
// MXFP4, IQ4_NL, IQ4_XS, Q3_K and Q2_K, made by ggml itself (the prebuilt
// libraries of the npm package node-llama-cpp 3.21.1). See README.md; run it
// through build.sh. It is not part of the Go build and no test needs it.
//
// For each type T (Tandem's lower-case name):
//   T.q, T.deq          ggml_quantize_chunk(src) and its to_float
//   rnd.T.q, rnd.T.deq  random blocks (sane scales) and their to_float
//   W.dot.V             for W in T.q, rnd.T.q and each CPU variant V
//                       (generic: libggml-cpu-x64, no SIMD; avx2:
//                       libggml-cpu-haswell; avx512: libggml-cpu-zen4): the
//                       vec_dot of weight row r with activation row t at
//                       [r*4+t], whole rows
//   W.dotp.V            the same over the first 256 (K-quants) or 480
//                       (32-element blocks: an odd block count) elements
// plus src, act (F32), act.q8_0, act.q8_k (the activations quantized by
// the CPU traits' from_float, identical across the variants, which gen
// checks) and log2f.up: for every k where glibc's floorf(log2f(x)) rounds
// some x < 2^k up to k (MXFP4's shared exponent uses it), the smallest
// such x. gen checks that those x form one run just below 2^k.

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-cpu.h"
#include "gguf.h"

#define NE0 512
#define SRC_ROWS 8
#define RND_ROWS 16
#define ACT_ROWS 4
#define T_MXFP4 39

typedef const struct ggml_type_traits_cpu *(*traits_cpu_fn)(enum ggml_type);
typedef void (*cpu_init_fn)(void);

struct variant {
	const char *name, *lib;
	traits_cpu_fn traits;
};

static struct variant variants[] = {
	{"generic", "libggml-cpu-x64.so", NULL},
	{"avx2", "libggml-cpu-haswell.so", NULL},
	{"avx512", "libggml-cpu-zen4.so", NULL},
};
#define NVARIANTS (int)(sizeof variants / sizeof variants[0])

struct qtype {
	const char *name;
	int type;
};

static const struct qtype qtypes[] = {
	{"mxfp4", T_MXFP4},
	{"iq4_nl", GGML_TYPE_IQ4_NL},
	{"iq4_xs", GGML_TYPE_IQ4_XS},
	{"q3_k", GGML_TYPE_Q3_K},
	{"q2_k", GGML_TYPE_Q2_K},
};
#define NQTYPES (int)(sizeof qtypes / sizeof qtypes[0])

static void die(const char *msg, const char *arg) {
	fprintf(stderr, "gen: %s %s\n", msg, arg ? arg : "");
	exit(1);
}

// xorshift64* and Box-Muller: a fixed, documented stream.
static uint64_t rng = 42;
static uint64_t next_u64(void) {
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1DULL;
}
static double uniform(void) { return (double)(next_u64() >> 11) / 9007199254740992.0; }
static float normal(void) {
	double u = uniform(), v = uniform();
	if (u < 1e-300) u = 1e-300;
	return (float)(sqrt(-2 * log(u)) * cos(2 * M_PI * v));
}

static struct ggml_context *ctx;
static struct gguf_context *gctx;

static void add(const char *name, enum ggml_type type, int64_t ne0, int64_t ne1, const void *data) {
	struct ggml_tensor *t = ggml_new_tensor_2d(ctx, type, ne0, ne1);
	ggml_set_name(t, name);
	memcpy(t->data, data, ggml_nbytes(t));
	gguf_add_tensor(gctx, t);
}

// fill_src writes the quantizer input: rows 0-3 N(0, 0.5) with three
// outliers; 4 sparse (whole zero blocks, lone values); 5 a grid of
// multiples of 1/8 (rounding ties); 6 per 32-block a largest magnitude at
// or just below a power of two (MXFP4's exponent); 7 tiny and large
// magnitudes, subnormals included.
static void fill_src(float *src) {
	for (int i = 0; i < 4 * NE0; i++) src[i] = 0.5f * normal();
	src[17] = 6.5f;
	src[NE0 + 300] = -7.25f;
	src[3 * NE0 + 511] = 9.0f;
	float *r = src + 4 * NE0;
	for (int i = 0; i < NE0; i++) {
		int blk = i / 32;
		r[i] = 0;
		if (blk >= 2 && blk % 3 != 0 && (next_u64() & 7) == 0) r[i] = normal();
	}
	r[300] = 3.0f; // alone in its sub-block
	r = src + 5 * NE0;
	for (int i = 0; i < NE0; i++) r[i] = (float)((int)(next_u64() % 17) - 8) * 0.125f;
	r = src + 6 * NE0;
	for (int b = 0; b < NE0 / 32; b++) {
		int k = (int)(next_u64() % 41) - 20;
		float top = ldexpf(1.0f, k);
		if (b % 2) top = nextafterf(top, 0);
		if (b % 4 == 3) top = nextafterf(nextafterf(top, 0), 0);
		for (int j = 0; j < 32; j++) r[32 * b + j] = top * (float)(uniform() * 1.8 - 0.9);
		r[32 * b + (int)(next_u64() % 32)] = (b % 8 < 4) ? top : -top;
	}
	r = src + 7 * NE0;
	static const float mags[16] = {1e-6f, 1e-20f, 1e-38f, 1e-40f, 1e3f, 3e4f, 1e-3f, 2.0f,
	                               0.01f, 1e-30f, 5e3f, 0.5f, 1e-10f, 7e2f, 1e-44f, 1.5f};
	for (int b = 0; b < NE0 / 32; b++)
		for (int j = 0; j < 32; j++) r[32 * b + j] = mags[b] * normal();
}

static void put_half(uint8_t *p, float f) {
	ggml_fp16_t h = ggml_fp32_to_fp16(f);
	memcpy(p, &h, 2);
}

static float rand_scale(float lo, float hi) {
	float v = lo + (float)uniform() * (hi - lo);
	return (next_u64() & 1) ? -v : v;
}

// fill_rnd writes random blocks of type t: every byte random, then the
// scales set to finite values of realistic size (MXFP4: exponents around
// 127, the last row's blocks the extremes 0, 1, 2, 127, 253, 254, 255).
static void fill_rnd(int t, uint8_t *b, size_t nbytes, size_t bsize) {
	for (size_t i = 0; i < nbytes; i++) b[i] = (uint8_t)next_u64();
	size_t nb = nbytes / bsize;
	for (size_t i = 0; i < nb; i++) {
		uint8_t *x = b + i * bsize;
		switch (t) {
		case T_MXFP4: {
			static const uint8_t ext[7] = {0, 1, 2, 127, 253, 254, 255};
			size_t per_row = NE0 / 32;
			if (i / per_row == RND_ROWS - 1) x[0] = ext[(i % per_row) % 7];
			else x[0] = (uint8_t)(100 + next_u64() % 55);
			break;
		}
		case GGML_TYPE_IQ4_NL:
		case GGML_TYPE_IQ4_XS:
			put_half(x, rand_scale(1e-4f, 0.01f));
			break;
		case GGML_TYPE_Q3_K:
			put_half(x + 108, rand_scale(1e-4f, 0.01f));
			break;
		case GGML_TYPE_Q2_K:
			put_half(x + 80, rand_scale(1e-3f, 0.1f));
			put_half(x + 82, rand_scale(1e-3f, 0.1f));
			break;
		}
	}
}

// check_log2f scans every positive finite float and returns, per k, the
// smallest x < 2^k with floorf(log2f(x)) == k (0 where there is none),
// failing unless each such set is one run ending at 2^k's predecessor.
static int check_log2f(float *ups, int cap) {
	int n = 0;
	float prev_first = 0;
	int prev_k = 0, in_run = 0;
	for (uint32_t bits = 1; bits < 0x7f800000u; bits++) {
		float x;
		memcpy(&x, &bits, 4);
		int exact = ilogbf(x);
		int got = (int)floorf(log2f(x));
		if (got == exact) {
			if (in_run) die("log2f rounds up a run that does not reach a power of two", NULL);
			continue;
		}
		if (got != exact + 1) die("log2f is off by more than one", NULL);
		if (!in_run || prev_k != got) {
			if (n == cap) die("too many log2f runs", NULL);
			ups[n++] = x;
			prev_first = x;
			prev_k = got;
			in_run = 1;
		}
		float up;
		uint32_t ub = bits + 1;
		memcpy(&up, &ub, 4);
		if (ilogbf(up) == got) in_run = 0; // the run ends just below 2^k
	}
	(void)prev_first;
	return n;
}

int main(int argc, char **argv) {
	if (argc != 3) die("usage: gen LIBDIR OUT.gguf", NULL);
	const char *libdir = argv[1], *out = argv[2];
	char path[4096];
	for (int v = 0; v < NVARIANTS; v++) {
		snprintf(path, sizeof path, "%s/%s", libdir, variants[v].lib);
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h) die("dlopen", dlerror());
		cpu_init_fn init = (cpu_init_fn)dlsym(h, "ggml_cpu_init");
		variants[v].traits = (traits_cpu_fn)dlsym(h, "ggml_get_type_traits_cpu");
		if (!init || !variants[v].traits) die("dlsym in", path);
		init();
	}

	struct ggml_init_params ip = {64 << 20, NULL, false};
	ctx = ggml_init(ip);
	gctx = gguf_init_empty();
	gguf_set_val_str(gctx, "general.description",
	             "ggml quantization vectors (node-llama-cpp 3.21.1, llama.cpp 80fb11a); made by scripts/quantvectors");

	static float src[SRC_ROWS * NE0], act[ACT_ROWS * NE0], deq[RND_ROWS * NE0];
	static uint8_t q[RND_ROWS * NE0 * 2], actq[2][ACT_ROWS * NE0 * 2], tmp[ACT_ROWS * NE0 * 2];
	fill_src(src);
	add("src", GGML_TYPE_F32, NE0, SRC_ROWS, src);
	for (int i = 0; i < ACT_ROWS * NE0; i++) {
		act[i] = normal();
		if ((next_u64() & 63) == 0) act[i] *= 20;
	}
	add("act", GGML_TYPE_F32, NE0, ACT_ROWS, act);

	// Activations, quantized by each variant's from_float (must agree).
	const enum ggml_type acts[2] = {GGML_TYPE_Q8_0, GGML_TYPE_Q8_K};
	const char *actnames[2] = {"act.q8_0", "act.q8_k"};
	for (int a = 0; a < 2; a++) {
		size_t rb = ggml_row_size(acts[a], NE0);
		for (int v = 0; v < NVARIANTS; v++) {
			uint8_t *dst = v == 0 ? actq[a] : tmp;
			const struct ggml_type_traits_cpu *tc = variants[v].traits(acts[a]);
			for (int r = 0; r < ACT_ROWS; r++) tc->from_float(act + r * NE0, dst + r * rb, NE0);
			if (v > 0 && memcmp(actq[a], tmp, ACT_ROWS * rb) != 0) die("activation quantization differs in", variants[v].name);
		}
		add(actnames[a], acts[a], NE0, ACT_ROWS, actq[a]);
	}

	char name[128];
	for (int i = 0; i < NQTYPES; i++) {
		const struct qtype *qt = &qtypes[i];
		const struct ggml_type_traits *tr = ggml_get_type_traits(qt->type);
		size_t rb = ggml_row_size(qt->type, NE0);
		for (int pass = 0; pass < 2; pass++) {
			const char *prefix = pass == 0 ? "" : "rnd.";
			int rows = pass == 0 ? SRC_ROWS : RND_ROWS;
			if (pass == 0) {
				if (ggml_quantize_requires_imatrix(qt->type)) die("type needs an importance matrix:", qt->name);
				size_t n = ggml_quantize_chunk(qt->type, src, q, 0, rows, NE0, NULL);
				if (n != rows * rb) die("ggml_quantize_chunk size for", qt->name);
			} else {
				fill_rnd(qt->type, q, rows * rb, tr->type_size);
			}
			tr->to_float(q, deq, (int64_t)rows * NE0);
			snprintf(name, sizeof name, "%s%s.q", prefix, qt->name);
			add(name, qt->type, NE0, rows, q);
			snprintf(name, sizeof name, "%s%s.deq", prefix, qt->name);
			add(name, GGML_TYPE_F32, NE0, rows, deq);

			int k_part = tr->blck_size == 256 ? 256 : 480;
			for (int v = 0; v < NVARIANTS; v++) {
				const struct ggml_type_traits_cpu *tc = variants[v].traits(qt->type);
				int a = tc->vec_dot_type == GGML_TYPE_Q8_0 ? 0 : 1;
				if (tc->vec_dot_type != acts[a]) die("unexpected vec_dot_type for", qt->name);
				size_t arb = ggml_row_size(acts[a], NE0);
				for (int part = 0; part < 2; part++) {
					int n = part == 0 ? NE0 : k_part;
					float dots[RND_ROWS * ACT_ROWS];
					for (int r = 0; r < rows; r++)
						for (int t = 0; t < ACT_ROWS; t++)
							tc->vec_dot(n, &dots[r * ACT_ROWS + t], 0, q + r * rb, 0, actq[a] + t * arb, 0, 1);
					snprintf(name, sizeof name, "%s%s.%s.%s", prefix, qt->name, part == 0 ? "dot" : "dotp",
					         variants[v].name);
					add(name, GGML_TYPE_F32, rows * ACT_ROWS, 1, dots);
				}
			}
		}
	}

	static float ups[1024];
	int nups = check_log2f(ups, 1024);
	add("log2f.up", GGML_TYPE_F32, nups, 1, ups);

	if (!gguf_write_to_file(gctx, out, false)) die("cannot write", out);
	printf("wrote %s (%d log2f runs)\n", out, nups);
	return 0;
}
