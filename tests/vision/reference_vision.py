#!/usr/bin/python3
"""Reference vision encoders in numpy, written from Hugging Face transformers' modeling files.

Independent of pagoda's C++: it reads a projector GGUF (llama.cpp's mmproj layout) with the
minimal reader below, turns its tensors back into the parameters of the transformers modules,
and runs those modules' forward passes in float64, one function per module, named after it:

  LLaVA        models/clip/modeling_clip.py (CLIPVisionEmbeddings, CLIPEncoderLayer, ...) and
               models/llava/modeling_llava.py (LlavaMultiModalProjector, the feature selection)
  Gemma 3      models/siglip/modeling_siglip.py and models/gemma3/modeling_gemma3.py
               (Gemma3MultiModalProjector)
  Qwen2-VL     models/qwen2_vl/modeling_qwen2_vl.py and image_processing_qwen2_vl.py (the patch
               order)
  Qwen2.5-VL   models/qwen2_5_vl/modeling_qwen2_5_vl.py (window attention, RMSNorm, gated MLP)

Input: normalized planes (the preprocessor's output), [3][height][width] floats, as a .npy file
or raw little-endian f32 (then --width and --height). Output: the image's token embeddings,
[tokens][projection_dim], as .npy or raw f32 by the output's extension.

One deliberate choice: LLaVA's projector and Qwen's merger use transformers' nn.GELU() (erf),
but llama.cpp, whose files these are and whose outputs pagoda matches, computes ggml_gelu (the
tanh approximation). --gelu picks; tanh is the default, so the reference answers the question
"is the architecture right" without that known difference. Everything else is transformers'.

  reference_vision.py PROJECTOR.gguf PLANES [--width W --height H] -o OUT
  reference_vision.py --cases MANIFEST.json -o OUTPUTS.json   (what tests/data/vision keeps)
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

# ----------------------------------------------------------------------------------------------
# A minimal GGUF reader: metadata and F32 / F16 tensors.

GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGML_DTYPES = {0: np.float32, 1: np.float16}


class Gguf:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        self.pos = 0
        if self.data[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        self.pos = 4
        version, n_tensors, n_kv = self._read("<I"), self._read("<Q"), self._read("<Q")
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is not supported")
        self.meta = {}
        for _ in range(n_kv):
            key = self._string()
            self.meta[key] = self._value(self._read("<I"))
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            dims = [self._read("<Q") for _ in range(self._read("<I"))]
            infos.append((name, dims, self._read("<I"), self._read("<Q")))
        alignment = self.meta.get("general.alignment", 32)
        start = (self.pos + alignment - 1) // alignment * alignment
        self.tensors = {}
        for name, dims, ggml_type, offset in infos:
            if ggml_type not in GGML_DTYPES:
                raise ValueError(f"{path}: tensor {name} has ggml type {ggml_type}; this reader takes F32 and F16")
            count = int(np.prod(dims))
            # GGUF lists dimensions innermost first; numpy's shape is the reverse.
            array = np.frombuffer(self.data, GGML_DTYPES[ggml_type], count, start + offset)
            self.tensors[name] = array.reshape(list(reversed(dims))).astype(np.float64)

    def _read(self, fmt):
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def _string(self):
        n = self._read("<Q")
        self.pos += n
        return self.data[self.pos - n : self.pos].decode("utf-8")

    def _value(self, kind):
        if kind == 8:
            return self._string()
        if kind == 9:
            item, n = self._read("<I"), self._read("<Q")
            return [self._value(item) for _ in range(n)]
        return self._read(GGUF_SCALARS[kind])

    def get(self, name):
        return self.tensors.get(name)


# ----------------------------------------------------------------------------------------------
# The config, as transformers' configs would hold it, from llama.cpp's clip.* keys (with
# llama.cpp's defaults where a converter leaves a key out).


def read_config(g):
    m = g.meta
    projector = m.get("clip.projector_type")
    if projector is None:
        projector = "qwen2vl_merger" if m.get("clip.has_qwen2vl_merger") else "mlp"
    n_layers = m["clip.vision.block_count"]
    c = {
        "projector": projector,
        "image_size": m["clip.vision.image_size"],
        "patch_size": m["clip.vision.patch_size"],
        "hidden_size": m["clip.vision.embedding_length"],
        "num_heads": m["clip.vision.attention.head_count"],
        "num_layers": n_layers,
        "eps": m["clip.vision.attention.layer_norm_epsilon"],
        "use_gelu": bool(m.get("clip.use_gelu", False)),
        "use_silu": bool(m.get("clip.use_silu", False)),
        # Files of examples/llava's converters name the FFN's two matrices the other way round.
        "legacy": "clip.has_llava_projector" in m or "clip.has_qwen2vl_merger" in m,
    }
    feature_layers = m.get("clip.vision.feature_layer", [])
    # LLaVA: hidden_states[vision_feature_layer = -2], the output of block n - 2 counting from
    # 0, unless the file names a feature layer.
    c["feature_layer"] = max(feature_layers) if feature_layers else n_layers - 1
    c["spatial_merge_size"] = m.get("clip.vision.spatial_merge_size", 2)
    c["window_size"] = m.get("clip.vision.window_size", 112)
    if "clip.vision.wa_layer_indexes" in m:
        c["fullatt_block_indexes"] = list(m["clip.vision.wa_layer_indexes"])
    else:
        k = m.get("clip.vision.n_wa_pattern", 0)
        c["fullatt_block_indexes"] = [l for l in range(n_layers) if k > 0 and (l + 1) % k == 0]
    # Gemma 3: the pooling kernel (clip.vision.projector.scale_factor, 4 by default).
    c["pool_kernel"] = m.get("clip.vision.projector.scale_factor", 4)
    return c


# ----------------------------------------------------------------------------------------------
# Building blocks (torch.nn and transformers.activations), in float64.


def linear(x, weight, bias=None):
    y = x @ weight.T
    return y if bias is None else y + bias


def layer_norm(x, weight, bias, eps):  # nn.LayerNorm
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def rms_norm(x, weight, eps):  # Qwen2RMSNorm; Gemma3RMSNorm with its (1 + w) already in `weight`
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * weight


def gelu_tanh(x):  # "gelu_pytorch_tanh", and ggml_gelu
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


_erf = np.vectorize(math.erf)


def gelu_erf(x):  # nn.GELU(), "gelu"
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def quick_gelu(x):  # "quick_gelu"
    return x * (1.0 / (1.0 + np.exp(-1.702 * x)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def eager_attention(q, k, v, num_heads):
    """Non-causal scaled dot-product attention of [n][dim] queries, keys and values."""
    n, dim = q.shape
    hd = dim // num_heads
    q, k, v = (t.reshape(n, num_heads, hd).transpose(1, 0, 2) for t in (q, k, v))
    weights = softmax(q @ k.transpose(0, 2, 1) * hd**-0.5)
    return (weights @ v).transpose(1, 0, 2).reshape(n, dim)


def conv2d_patches(pixels, weight, bias=None):
    """nn.Conv2d(3, dim, kernel_size=p, stride=p) on [3][H][W], then flatten(2).transpose(1, 2)."""
    dim, channels, p, _ = weight.shape
    _, height, width = pixels.shape
    gh, gw = height // p, width // p
    patches = pixels.reshape(channels, gh, p, gw, p).transpose(1, 3, 0, 2, 4).reshape(gh * gw, channels * p * p)
    return linear(patches, weight.reshape(dim, -1), bias)


class Weights:
    """The file's tensors under transformers' roles."""

    def __init__(self, g, c):
        self.g, self.c = g, c

    def __call__(self, name):
        t = self.g.get(name)
        if t is None:
            raise KeyError(f"the projector file has no tensor {name}")
        return t

    def opt(self, name):
        return self.g.get(name)

    def ffn(self, layer):
        """(up, down) as (weight, bias) pairs, telling the older files' swapped names apart."""
        p = f"v.blk.{layer}."
        up, down = (self(p + "ffn_up.weight"), self.opt(p + "ffn_up.bias")), (
            self(p + "ffn_down.weight"),
            self.opt(p + "ffn_down.bias"),
        )
        dim = self.c["hidden_size"]
        swapped = up[0].shape[1] != dim if up[0].shape[0] != up[0].shape[1] else self.c["legacy"]
        return (down, up) if swapped else (up, down)


# ----------------------------------------------------------------------------------------------
# LLaVA: CLIP's vision tower (modeling_clip.py) and LLaVA's projector (modeling_llava.py).


def clip_vision_embeddings(w, pixels):  # CLIPVisionEmbeddings.forward
    patch_embeds = conv2d_patches(pixels, w("v.patch_embd.weight"), w.opt("v.patch_embd.bias"))
    embeddings = np.concatenate([w("v.class_embd")[None, :], patch_embeds], axis=0)
    position_ids = np.arange(embeddings.shape[0])
    return embeddings + w("v.position_embd.weight")[position_ids]


def clip_attention(w, layer, x, c):  # CLIPAttention.forward
    p = f"v.blk.{layer}."
    q = linear(x, w(p + "attn_q.weight"), w(p + "attn_q.bias"))
    k = linear(x, w(p + "attn_k.weight"), w(p + "attn_k.bias"))
    v = linear(x, w(p + "attn_v.weight"), w(p + "attn_v.bias"))
    return linear(eager_attention(q, k, v, c["num_heads"]), w(p + "attn_out.weight"), w(p + "attn_out.bias"))


def clip_mlp(w, layer, x, act):  # CLIPMLP.forward: fc2(act(fc1(x))); SiglipMLP is the same
    (fc1, fc1_b), (fc2, fc2_b) = w.ffn(layer)
    return linear(act(linear(x, fc1, fc1_b)), fc2, fc2_b)


def clip_encoder_layer(w, layer, x, c, act):  # CLIPEncoderLayer.forward; SiglipEncoderLayer is the same
    p = f"v.blk.{layer}."
    residual = x
    x = layer_norm(x, w(p + "ln1.weight"), w(p + "ln1.bias"), c["eps"])
    x = residual + clip_attention(w, layer, x, c)
    residual = x
    x = layer_norm(x, w(p + "ln2.weight"), w(p + "ln2.bias"), c["eps"])
    return residual + clip_mlp(w, layer, x, act)


def llava(w, c, pixels, gelu):
    # CLIPVisionTransformer.forward with output_hidden_states: hidden_states[0] is the
    # pre-LayerNorm's output, hidden_states[i] block i's; the post_layernorm only makes the
    # pooled output, which LLaVA does not use.
    act = gelu_tanh if c["use_gelu"] else quick_gelu
    x = clip_vision_embeddings(w, pixels)
    x = layer_norm(x, w("v.pre_ln.weight"), w("v.pre_ln.bias"), c["eps"])
    for layer in range(c["feature_layer"]):
        x = clip_encoder_layer(w, layer, x, c, act)
    # LlavaModel.get_image_features: vision_feature_select_strategy "default" drops the CLS row.
    features = x[1:]
    # LlavaMultiModalProjector: linear_1, act (projector_hidden_act "gelu"), linear_2.
    hidden = gelu(linear(features, w("mm.0.weight"), w("mm.0.bias")))
    return linear(hidden, w("mm.2.weight"), w("mm.2.bias"))


# ----------------------------------------------------------------------------------------------
# Gemma 3: SigLIP's vision tower (modeling_siglip.py), Gemma3MultiModalProjector.


def siglip_vision_embeddings(w, pixels):  # SiglipVisionEmbeddings.forward (no interpolation)
    embeddings = conv2d_patches(pixels, w("v.patch_embd.weight"), w("v.patch_embd.bias"))
    return embeddings + w("v.position_embd.weight")[np.arange(embeddings.shape[0])]


def gemma3_multimodal_projector(w, c, vision_outputs):  # Gemma3MultiModalProjector.forward
    seq_length, dim = vision_outputs.shape
    patches_per_image = int(round(math.sqrt(seq_length)))
    k = c["pool_kernel"]  # patches_per_image // sqrt(mm_tokens_per_image)
    # transpose(1, 2).reshape(b, dim, side, side), AvgPool2d(k, stride=k), flatten(2).transpose(1, 2)
    grid = vision_outputs.T.reshape(dim, patches_per_image, patches_per_image)
    side = patches_per_image // k
    pooled = grid.reshape(dim, side, k, side, k).mean(axis=(2, 4)).reshape(dim, side * side).T
    # mm_soft_emb_norm: Gemma3RMSNorm, x·(1 + w); llama.cpp's converter stores 1 + w.
    normed = rms_norm(pooled, w("mm.soft_emb_norm.weight"), c["eps"])
    # torch.matmul(normed, mm_input_projection_weight): the weight is [vision dim][text dim].
    return normed @ w("mm.input_projection.weight")


def gemma3(w, c, pixels, gelu):
    del gelu  # SigLIP's MLP is gelu_pytorch_tanh, and the projector has no activation
    x = siglip_vision_embeddings(w, pixels)
    for layer in range(c["num_layers"]):
        x = clip_encoder_layer(w, layer, x, c, gelu_tanh)
    x = layer_norm(x, w("v.post_ln.weight"), w("v.post_ln.bias"), c["eps"])  # last_hidden_state
    return gemma3_multimodal_projector(w, c, x)


# ----------------------------------------------------------------------------------------------
# Qwen2-VL (modeling_qwen2_vl.py) and Qwen2.5-VL (modeling_qwen2_5_vl.py).


def qwen2vl_image_patches(pixels, patch_size, merge_size, temporal_patch_size=2):
    """Qwen2VLImageProcessor._preprocess's flatten_patches for one image: the frame repeated to
    temporal_patch_size, patches in merge order, each patch's values (channel, frame, row, col)."""
    channel, height, width = pixels.shape
    patches = np.repeat(pixels[None], temporal_patch_size, axis=0)
    grid_t, grid_h, grid_w = 1, height // patch_size, width // patch_size
    patches = patches.reshape(
        grid_t,
        temporal_patch_size,
        channel,
        grid_h // merge_size,
        merge_size,
        patch_size,
        grid_w // merge_size,
        merge_size,
        patch_size,
    )
    patches = patches.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return patches.reshape(grid_t * grid_h * grid_w, channel * temporal_patch_size * patch_size**2), (
        grid_t,
        grid_h,
        grid_w,
    )


def qwen2vl_patch_embed(w, flat):  # Qwen2VisionPatchEmbed: Conv3d (3, 2, p, p) → dim, no bias
    # The file splits the conv3d kernel by frame: v.patch_embd.weight (t = 0) and .weight.1 (t = 1).
    kernel = np.stack([w("v.patch_embd.weight"), w("v.patch_embd.weight.1")], axis=2)  # [dim][3][2][p][p]
    return linear(flat, kernel.reshape(kernel.shape[0], -1))


def vision_rotary_embedding(dim, seqlen, theta=10000.0):  # VisionRotaryEmbedding(dim).forward(seqlen)
    inv_freq = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    return np.outer(np.arange(seqlen, dtype=np.float64), inv_freq)


def rot_pos_emb(grid_thw, merge_size, head_dim):  # Qwen2VisionTransformerPretrainedModel.rot_pos_emb
    t, h, w = grid_thw
    hpos_ids = np.broadcast_to(np.arange(h)[:, None], (h, w))
    hpos_ids = hpos_ids.reshape(h // merge_size, merge_size, w // merge_size, merge_size).transpose(0, 2, 1, 3).flatten()
    wpos_ids = np.broadcast_to(np.arange(w)[None, :], (h, w))
    wpos_ids = wpos_ids.reshape(h // merge_size, merge_size, w // merge_size, merge_size).transpose(0, 2, 1, 3).flatten()
    pos_ids = np.tile(np.stack([hpos_ids, wpos_ids], axis=-1), (t, 1))
    full = vision_rotary_embedding(head_dim // 2, max(h, w))
    return full[pos_ids].reshape(pos_ids.shape[0], -1)


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def apply_rotary_pos_emb_vision(q, k, cos, sin):  # q, k: [seq][heads][head_dim]
    cos, sin = cos[:, None, :], sin[:, None, :]
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def qwen_vision_attention(w, layer, x, cu_seqlens, position_embeddings, c):  # VisionAttention.forward
    p = f"v.blk.{layer}."
    seq, dim = x.shape
    heads = c["num_heads"]
    # The qkv Linear's weight is the file's Q, K and V stacked.
    qkv_w = np.concatenate([w(p + "attn_q.weight"), w(p + "attn_k.weight"), w(p + "attn_v.weight")])
    qkv_b = np.concatenate([w(p + "attn_q.bias"), w(p + "attn_k.bias"), w(p + "attn_v.bias")])
    q, k, v = linear(x, qkv_w, qkv_b).reshape(seq, 3, heads, -1).transpose(1, 0, 2, 3)
    cos, sin = position_embeddings
    q, k = apply_rotary_pos_emb_vision(q, k, cos, sin)
    out = np.zeros((seq, dim))
    for start, end in zip(cu_seqlens[:-1], cu_seqlens[1:]):  # one attention per cu_seqlens segment
        out[start:end] = eager_attention(
            q[start:end].reshape(end - start, dim),
            k[start:end].reshape(end - start, dim),
            v[start:end].reshape(end - start, dim),
            heads,
        )
    return linear(out, w(p + "attn_out.weight"), w(p + "attn_out.bias"))


def qwen2vl_vision_block(w, layer, x, cu_seqlens, position_embeddings, c):  # Qwen2VLVisionBlock
    p = f"v.blk.{layer}."
    x = x + qwen_vision_attention(
        w, layer, layer_norm(x, w(p + "ln1.weight"), w(p + "ln1.bias"), c["eps"]), cu_seqlens, position_embeddings, c
    )
    # VisionMlp: fc2(act(fc1(x))), hidden_act quick_gelu
    return x + clip_mlp(w, layer, layer_norm(x, w(p + "ln2.weight"), w(p + "ln2.bias"), c["eps"]), quick_gelu)


def qwen2_5_vl_vision_block(w, layer, x, cu_seqlens, position_embeddings, c):  # Qwen2_5_VLVisionBlock
    p = f"v.blk.{layer}."
    x = x + qwen_vision_attention(
        w, layer, rms_norm(x, w(p + "ln1.weight"), c["eps"]), cu_seqlens, position_embeddings, c
    )
    # Qwen2_5_VLMLP(bias=True): down_proj(act_fn(gate_proj(x)) * up_proj(x)), hidden_act silu
    h = rms_norm(x, w(p + "ln2.weight"), c["eps"])
    (up, up_b), (down, down_b) = w.ffn(layer)
    gate = linear(h, w(p + "ffn_gate.weight"), w(p + "ffn_gate.bias"))
    return x + linear(silu(gate) * linear(h, up, up_b), down, down_b)


def patch_merger(w, c, x, norm, gelu):  # Qwen2VLPatchMerger / Qwen2_5_VLPatchMerger
    merged = norm(x).reshape(-1, x.shape[1] * c["spatial_merge_size"] ** 2)  # ln_q, then view
    mm2 = "mm.2" if w.opt("mm.2.weight") is not None else "mm.1"
    return linear(gelu(linear(merged, w("mm.0.weight"), w("mm.0.bias"))), w(mm2 + ".weight"), w(mm2 + ".bias"))


def get_window_index(grid_thw, c):  # Qwen2_5_VisionTransformerPretrainedModel.get_window_index
    window_index, cu_window_seqlens, window_index_id = [], [0], 0
    merge = c["spatial_merge_size"]
    vit_merger_window_size = c["window_size"] // merge // c["patch_size"]
    spatial_merge_unit = merge * merge
    grid_t, grid_h, grid_w = grid_thw
    llm_grid_h, llm_grid_w = grid_h // merge, grid_w // merge
    index = np.arange(grid_t * llm_grid_h * llm_grid_w).reshape(grid_t, llm_grid_h, llm_grid_w)
    pad_h = vit_merger_window_size - llm_grid_h % vit_merger_window_size
    pad_w = vit_merger_window_size - llm_grid_w % vit_merger_window_size
    num_windows_h = (llm_grid_h + pad_h) // vit_merger_window_size
    num_windows_w = (llm_grid_w + pad_w) // vit_merger_window_size
    index_padded = np.pad(index, ((0, 0), (0, pad_h), (0, pad_w)), constant_values=-100)
    index_padded = index_padded.reshape(
        grid_t, num_windows_h, vit_merger_window_size, num_windows_w, vit_merger_window_size
    )
    index_padded = index_padded.transpose(0, 1, 3, 2, 4).reshape(
        grid_t, num_windows_h * num_windows_w, vit_merger_window_size, vit_merger_window_size
    )
    seqlens = (index_padded != -100).sum(axis=(2, 3)).reshape(-1)
    index_padded = index_padded.reshape(-1)
    window_index.append(index_padded[index_padded != -100] + window_index_id)
    cu_window_seqlens.extend((np.cumsum(seqlens) * spatial_merge_unit + cu_window_seqlens[-1]).tolist())
    return np.concatenate(window_index), cu_window_seqlens


def qwen2vl(w, c, pixels, gelu):  # Qwen2VisionTransformerPretrainedModel.forward
    merge = c["spatial_merge_size"]
    flat, grid_thw = qwen2vl_image_patches(pixels, c["patch_size"], merge)
    x = qwen2vl_patch_embed(w, flat)
    head_dim = c["hidden_size"] // c["num_heads"]
    emb = rot_pos_emb(grid_thw, merge, head_dim)
    emb = np.concatenate([emb, emb], axis=-1)
    position_embeddings = (np.cos(emb), np.sin(emb))
    cu_seqlens = [0, x.shape[0]]
    for layer in range(c["num_layers"]):
        x = qwen2vl_vision_block(w, layer, x, cu_seqlens, position_embeddings, c)
    ln_q = lambda h: layer_norm(h, w("v.post_ln.weight"), w("v.post_ln.bias"), c["eps"])  # noqa: E731
    return patch_merger(w, c, x, ln_q, gelu)


def qwen2_5_vl(w, c, pixels, gelu):  # Qwen2_5_VisionTransformerPretrainedModel.forward
    merge = c["spatial_merge_size"]
    unit = merge * merge
    flat, grid_thw = qwen2vl_image_patches(pixels, c["patch_size"], merge)
    x = qwen2vl_patch_embed(w, flat)
    head_dim = c["hidden_size"] // c["num_heads"]
    rotary_pos_emb = rot_pos_emb(grid_thw, merge, head_dim)
    window_index, cu_window_seqlens = get_window_index(grid_thw, c)
    cu_window_seqlens = [s for i, s in enumerate(cu_window_seqlens) if i == 0 or s != cu_window_seqlens[i - 1]]
    seq_len = x.shape[0]
    x = x.reshape(seq_len // unit, unit, -1)[window_index].reshape(seq_len, -1)
    rotary_pos_emb = rotary_pos_emb.reshape(seq_len // unit, unit, -1)[window_index].reshape(seq_len, -1)
    emb = np.concatenate([rotary_pos_emb, rotary_pos_emb], axis=-1)
    position_embeddings = (np.cos(emb), np.sin(emb))
    cu_seqlens = [0, seq_len]
    for layer in range(c["num_layers"]):
        now = cu_seqlens if layer in c["fullatt_block_indexes"] else cu_window_seqlens
        x = qwen2_5_vl_vision_block(w, layer, x, now, position_embeddings, c)
    x = patch_merger(w, c, x, lambda h: rms_norm(h, w("v.post_ln.weight"), c["eps"]), gelu)
    return x[np.argsort(window_index)]


FAMILIES = {"mlp": llava, "gemma3": gemma3, "qwen2vl_merger": qwen2vl, "qwen2.5vl_merger": qwen2_5_vl}


def encode(projector_path, pixels, gelu_name="tanh"):
    g = Gguf(projector_path)
    c = read_config(g)
    if c["projector"] not in FAMILIES:
        raise ValueError(f"{projector_path}: projector type {c['projector']} is not one of {sorted(FAMILIES)}")
    gelu = gelu_tanh if gelu_name == "tanh" else gelu_erf
    return FAMILIES[c["projector"]](Weights(g, c), c, pixels.astype(np.float64), gelu)


# ----------------------------------------------------------------------------------------------
# Command line.


def read_planes(path, width=None, height=None):
    if path.endswith(".npy"):
        planes = np.load(path)
    else:
        planes = np.fromfile(path, dtype="<f4").reshape(3, height, width)
    if planes.ndim != 3 or planes.shape[0] != 3:
        raise ValueError(f"{path}: planes must be [3][height][width], not {planes.shape}")
    return planes


def run_cases(manifest_path, out_path, gelu):
    """Every case of a manifest (tests/test_vision_encoder.cpp writes one with the files):
    {"cases": [{"name", "projector", "projector_xxh3", "planes", "planes_xxh3", "width", "height"}]}
    with paths relative to the manifest. The hashes are carried into the outputs, so the test can
    tell when the files it writes no longer are the ones these outputs were computed from."""
    base = os.path.dirname(os.path.abspath(manifest_path))
    with open(manifest_path) as f:
        manifest = json.load(f)
    cases = []
    for case in manifest["cases"]:
        planes = read_planes(os.path.join(base, case["planes"]), case["width"], case["height"])
        out = encode(os.path.join(base, case["projector"]), planes, gelu)
        cases.append(
            {
                "name": case["name"],
                "projector_xxh3": case["projector_xxh3"],
                "planes_xxh3": case["planes_xxh3"],
                "width": case["width"],
                "height": case["height"],
                "tokens": out.shape[0],
                "embeddings": [float(f"{v:.9g}") for v in out.astype(np.float32).reshape(-1)],
            }
        )
        print(f"{case['name']}: {out.shape[0]} tokens of {out.shape[1]}", file=sys.stderr)
    with open(out_path, "w") as f:
        json.dump({"generator": "tests/vision/reference_vision.py", "gelu": gelu, "cases": cases}, f)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("projector", nargs="?", help="the projector GGUF (mmproj)")
    parser.add_argument("planes", nargs="?", help="normalized planes: .npy [3][h][w], or raw f32 with --width/--height")
    parser.add_argument("--width", type=int)
    parser.add_argument("--height", type=int)
    parser.add_argument("--cases", help="a manifest of cases (see run_cases) instead of one image")
    parser.add_argument("--gelu", choices=["tanh", "erf"], default="tanh", help="the projector's GELU (see above)")
    parser.add_argument("-o", "--output", required=True, help=".npy, or raw f32 otherwise; with --cases, JSON")
    args = parser.parse_args()
    if args.cases:
        run_cases(args.cases, args.output, args.gelu)
        return
    if not args.projector or not args.planes:
        parser.error("give a projector and planes, or --cases")
    out = encode(args.projector, read_planes(args.planes, args.width, args.height), args.gelu).astype(np.float32)
    if args.output.endswith(".npy"):
        np.save(args.output, out)
    else:
        out.astype("<f4").tofile(args.output)


if __name__ == "__main__":
    main()
