#!/usr/bin/python3
"""Generate the Wan2.2 video-VAE test fixtures under tests/data/vae22/ with the format owners' own code.

Run from the repository root, then commit the output:

    /usr/bin/python3 tools/make_vae22_fixtures.py [--wan-repo DIR] [--diffusers-repo DIR]

The repositories are git mirrors of Wan-Video/Wan2.2 and huggingface/diffusers (defaults under /work/.mirror). The
script reads, at HEAD of each:
  Wan2.2     wan/modules/vae2_2.py                                   (WanVAE_, Wan2_2_VAE's latent mean/std)
  diffusers  src/diffusers/models/autoencoders/autoencoder_kl_wan.py (AutoencoderKLWan with is_residual)
             scripts/convert_wan_to_diffusers.py                     (convert_vae_22, taken out with `ast`)
and imports them from a temporary directory; nothing of theirs is copied into this repository. The helpers and
stand-ins (einops, scaled_dot_product_attention, the diffusers package's imports) are make_vae_fixtures.py's, plus
einops' patchify patterns of vae2_2.py. The C++ test suite reads the committed files and never needs torch.

Outputs (tests/data/vae22/):
  tiny_vae22.pth              torch.save(WanVAE_(dim 4, dec_dim 4, z_dim 48, Wan's dim_mult [1,2,4,4], 2 residual
                              blocks, temperal_downsample [False, True, True]).state_dict()): Wan2.2_VAE.pth's form,
                              small; no config file: megaslide tells it from its shapes. Weights seeded as
                              make_vae_fixtures.py seeds Wan2.1's.
  clip.safetensors            `video` [1,3,9,32,48] F32 in [-1,1] and Wan's own outputs in float64 (weights = the
                              stored float32 values, vae2_2's Upsample float32 round trip bypassed), stored F32:
                              latents_fN = encode(video[:, :, :N], [mean, 1/std]), decoded_fN = decode(latents_fN as
                              stored).clamp(-1, 1), N = 1, 5, 9.
  diffusers_default_names.json  [[diffusers_name, wan_name, shape], ...]: convert_vae_22 on Wan2.2's own
                              config's state dict, in Wan's order.
  diffusers_tiny_names.json   [[name, shape], ...]: AutoencoderKLWan(is_residual=True, the tiny widths).state_dict().
  expected.json               commits used, config, what each file holds.
"""
import argparse
import ast
import collections
import copy
import inspect
import os
import sys
import tempfile
import types

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_vae_fixtures as v21  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "data", "vae22")
DEFAULT_WAN_REPO = "/work/.mirror/Wan-Video+Wan2.2/repo"
WAN_VAE_PY = "wan/modules/vae2_2.py"

TINY = collections.OrderedDict([("dim", 4), ("dec_dim", 4), ("z_dim", 48), ("dim_mult", [1, 2, 4, 4]),
                                ("num_res_blocks", 2), ("attn_scales", []),
                                ("temperal_downsample", [False, True, True])])
WAN22 = dict(dim=160, dec_dim=256, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
             temperal_downsample=[False, True, True])  # Wan2_2_VAE's
CLIP_SHAPE = (1, 3, 9, 32, 48)
FRAMES = (1, 5, 9)
WEIGHT_SEED = 20251207
VIDEO_SEED = 2207


def rearrange(x, pattern, **sizes):
    """make_vae_fixtures' two patterns, and vae2_2.py's patchify / unpatchify of 5-d clips."""
    spec = " ".join(pattern.replace("->", " -> ").split())
    if spec == "b c f (h q) (w r) -> b (c r q) f h w":
        b, c, f, h, w = x.shape
        q, r = sizes["q"], sizes["r"]
        return x.reshape(b, c, f, h // q, q, w // r, r).permute(0, 1, 6, 4, 2, 3, 5).reshape(b, c * r * q, f, h // q,
                                                                                             w // r)
    if spec == "b (c r q) f h w -> b c f (h q) (w r)":
        b, crq, f, h, w = x.shape
        q, r = sizes["q"], sizes["r"]
        return x.reshape(b, crq // (r * q), r, q, f, h, w).permute(0, 1, 4, 5, 3, 6, 2).reshape(b, crq // (r * q), f,
                                                                                                h * q, w * r)
    return v21._rearrange(x, pattern, **sizes)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wan-repo", default=DEFAULT_WAN_REPO)
    ap.add_argument("--diffusers-repo", default=v21.DEFAULT_DIFFUSERS_REPO)
    ap.add_argument("--out", default=OUT_DIR, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    wan_git, dif_git = v21.resolve_gitdir(a.wan_repo), v21.resolve_gitdir(a.diffusers_repo)
    os.makedirs(a.out, exist_ok=True)
    out = lambda n: os.path.join(a.out, n)  # noqa: E731

    with tempfile.TemporaryDirectory(prefix="vae22_fixtures_") as tmp:
        standins = v21.install_standins()
        if standins["einops"].startswith("stand-in"):
            sys.modules["einops"] = types.SimpleNamespace(rearrange=rearrange)
            standins["einops"] = "stand-in (4 patterns)"
        wan_py = v21.extract(wan_git, WAN_VAE_PY, os.path.join(tmp, "wan_vae22_snapshot.py"))
        akw_py = v21.extract(dif_git, v21.DIFFUSERS_AKW_PY, os.path.join(tmp, "autoencoder_kl_wan.py"))
        conv_py = v21.extract(dif_git, v21.DIFFUSERS_CONVERT_PY, os.path.join(tmp, "convert_wan_to_diffusers.py"))
        wan = v21.load_module("wan_vae22_snapshot", wan_py)
        akw = v21.load_module(v21.install_diffusers_stubs(), akw_py)
        mean, std = v21.latent_constants(wan_py, "Wan2_2_VAE")
        assert len(mean) == len(std) == 48

        # 1. weights: Wan2.2_VAE.pth's form ------------------------------------------------------------------
        torch.manual_seed(0)
        model = wan.WanVAE_(**TINY, dropout=0.0).float().eval()
        v21.seed_weights(model, WEIGHT_SEED)
        sd = model.state_dict()
        torch.save(sd, out("tiny_vae22.pth"))
        n_params = sum(t.numel() for t in sd.values())

        # 2. clip: Wan's own encode / decode in float64 ------------------------------------------------------
        model64 = copy.deepcopy(model).double().eval()
        scale = [torch.tensor(mean, dtype=v21.F64), 1.0 / torch.tensor(std, dtype=v21.F64)]
        video = v21.make_video(CLIP_SHAPE, VIDEO_SEED)
        clip = collections.OrderedDict([("video", video)])
        clamped = {}
        up_forward = wan.Upsample.forward
        wan.Upsample.forward = nn.Upsample.forward  # vae2_2's bf16 workaround would round to float32
        try:
            with torch.no_grad():
                for frames in FRAMES:
                    lat = model64.encode(video[:, :, :frames].double(), scale).float()
                    raw = model64.decode(lat.double(), scale)
                    clip[f"latents_f{frames}"] = lat
                    clip[f"decoded_f{frames}"] = raw.clamp(-1.0, 1.0).float()
                    clamped[f"decoded_f{frames}"] = round(float((raw.abs() > 1).double().mean()), 6)
        finally:
            wan.Upsample.forward = up_forward
        v21.write_safetensors(out("clip.safetensors"), clip)

        # 3. diffusers' convert_vae_22 on Wan2.2's own config ------------------------------------------------
        with v21.no_init():
            wan_default_sd = wan.WanVAE_(**WAN22, dropout=0.0).state_dict()
        # The script's config names keys the constructor at HEAD does not take (clip_output): diffusers'
        # register_to_config passes only the constructor's own parameters, so this does too.
        params = inspect.signature(akw.AutoencoderKLWan.__init__).parameters
        dropped = set()

        def construct(**kw):
            dropped.update(k for k in kw if k not in params)
            return akw.AutoencoderKLWan(**{k: v for k, v in kw.items() if k in params})

        tree = ast.parse(open(conv_py).read())
        config_node = next(n for n in tree.body if isinstance(n, ast.Assign)
                           and getattr(n.targets[0], "id", "") == "vae22_diffusers_config")
        _, captured = v21.run_convert(conv_py, "convert_vae_22", akw, wan_default_sd, "Wan2.2_VAE.pth", construct,
                                      {"vae22_diffusers_config": ast.literal_eval(config_node.value)})
        by_id = {id(t): k for k, t in wan_default_sd.items()}
        order = {k: i for i, k in enumerate(wan_default_sd)}
        rows = sorted(([d, by_id[id(t)], list(t.shape)] for d, t in captured.items()), key=lambda r: order[r[1]])
        assert len(rows) == len(wan_default_sd) == len({r[1] for r in rows})
        v21.write_json_rows(out("diffusers_default_names.json"), rows)
        n_default = sum(t.numel() for t in wan_default_sd.values())
        del wan_default_sd, captured, by_id

        # 4. diffusers' tiny model names ---------------------------------------------------------------------
        with v21.no_init():
            dif_tiny = akw.AutoencoderKLWan(base_dim=TINY["dim"], decoder_base_dim=TINY["dec_dim"], z_dim=TINY["z_dim"],
                                            dim_mult=TINY["dim_mult"], num_res_blocks=TINY["num_res_blocks"],
                                            attn_scales=TINY["attn_scales"],
                                            temperal_downsample=TINY["temperal_downsample"], is_residual=True,
                                            in_channels=12, out_channels=12, patch_size=2)
        tiny_rows = [[k, list(t.shape)] for k, t in dif_tiny.state_dict().items()]
        v21.write_json_rows(out("diffusers_tiny_names.json"), tiny_rows)
        assert "is_residual" in inspect.signature(akw.AutoencoderKLWan.__init__).parameters

        # 5. expected.json -----------------------------------------------------------------------------------
        expected = collections.OrderedDict()
        expected["generator"] = "tools/make_vae22_fixtures.py (/usr/bin/python3, torch %s)" % torch.__version__
        expected["sources"] = {
            "Wan-Video/Wan2.2": {"commit": v21.git(wan_git, "rev-parse", "HEAD").decode().strip(),
                                 "files": [v21.source_info(wan_git, WAN_VAE_PY)]},
            "huggingface/diffusers": {"commit": v21.git(dif_git, "rev-parse", "HEAD").decode().strip(),
                                      "files": [v21.source_info(dif_git, v21.DIFFUSERS_AKW_PY),
                                                v21.source_info(dif_git, v21.DIFFUSERS_CONVERT_PY)]},
        }
        expected["standins"] = standins
        expected["config_keys_not_taken"] = sorted(dropped)
        expected["config"] = TINY
        expected["params"] = n_params
        expected["default_params"] = n_default
        expected["tensors"] = len(sd)
        expected["weights_init"] = f"make_vae_fixtures.py's seed_weights, torch.Generator seed {WEIGHT_SEED}"
        expected["clip"] = {"video": list(CLIP_SHAPE), "seed": VIDEO_SEED, "frames": list(FRAMES)}
        expected["scale"] = "[latents_mean, 1 / latents_std] of Wan2_2_VAE (float64), as it passes them to WanVAE_"
        expected["clamped_fraction"] = clamped
        v21.write_json_object(out("expected.json"), expected)

    for name in sorted(os.listdir(a.out)):
        print(f"  {os.path.getsize(out(name)):>8}  {name}")
    print(f"{n_params:,} parameters in {len(sd)} tensors; Wan2.2's own config {n_default:,}; {len(rows)} "
          f"convert_vae_22 rows, {len(tiny_rows)} tiny diffusers names; clamped {clamped}; stand-ins: {standins}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
