#pragma once
// Row operations of a llama block and of sampling. Each row's result is a fixed function of
// that row alone (bitwise independent of how many rows a batch has); SIMD paths may differ
// from the portable one in the last bits.

namespace pagoda::kernels {

// out[i] = weight[i] · (x[i] / sqrt(mean(x²) + eps)), as llama2.c computes it. out may be x.
void rmsnorm(const float* x, const float* weight, float* out, int n, float eps);

// rmsnorm of `rows` rows (strides ldx and ldo), in parallel in the caller's task arena.
void rmsnorm_rows(const float* x, int ldx, const float* weight, float* out, int ldo, int rows, int n, float eps);

// out[i] = silu(gate[i]) · up[i] with silu(x) = x / (1 + exp(-x)). out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int n);

// out[i] = gelu(gate[i]) · up[i], GELU's tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x +
// 0.044715·x³))) (Gemma). Plain scalar code: the same bits on every ISA. out may alias gate or up.
void geglu(const float* gate, const float* up, float* out, int n);

// out[i] = gelu(x[i]), the same tanh approximation (bert's FFN), computed as x / (1 +
// exp(-2·√(2/π)·(x + 0.044715·x³))), which equals it; vectorized, so the last bits follow the
// ISA. out may be x.
void gelu(const float* x, float* out, int n);

// In place: x[i] = exp(x[i] - max x) / Σ exp(x[j] - max x).
void softmax(float* x, int n);

// Index of the largest value; the first one on ties. n must be positive.
int argmax(const float* x, int n);

}  // namespace pagoda::kernels
