"""One contestant of the GPU benchmark (`benchmarks.gpu`) in a process of its own.

    python -m benchmarks.gpu_worker kbert peak train infer --batch 256 --seq 128
    python -m benchmarks.gpu_worker hf_compile train infer --batch 256 --seq 128

Cases: `train` is BERT pre-training (MLM at `--masked` positions + NSP, BERT's AdamW recipe:
weight decay 0.01 off LayerNorm and biases, ε 1e-6, gradients clipped to a global norm of 1),
`infer` the 2-class classifier's logits, `peak` the best bf16 (or `--dtype`) matmul. kbert runs
on Keras' JAX backend as its users would, through `model.fit` and `model.predict`, each window
one call over `--steps` batches; Hugging Face runs `--steps` steps of its usual loop under
`torch.autocast`, eager (`hf_eager`) or with the model under `torch.compile` (`hf_compile`),
on CUDA where there is one. Prints one JSON line per case: the median of `--windows` timed
windows after one untimed window (compilation), in sequences per second, and the device.
"""

import argparse
import contextlib
import gc
import importlib
import importlib.util
import json
import os
import statistics
import sys
import time
import types

import numpy as np

from benchmarks import contestants, flops

CONTESTANTS = ("kbert", "hf_eager", "hf_compile")
CASES = ("train", "infer", "peak")


def kbert_module(name):
    """`kbert.<name>` (config, models, training.optimizer) without running the `__init__` of
    `kbert` or `kbert.training`, which import the TensorFlow text and data pipelines: the GPU
    image has JAX and PyTorch but no TensorFlow, and these modules need at most Keras."""
    root = (sys.modules["kbert"].__path__[0] if "kbert" in sys.modules
            else os.path.dirname(importlib.util.find_spec("kbert").origin))
    for package, path in (("kbert", root), ("kbert.training", os.path.join(root, "training"))):
        if package not in sys.modules:
            stub = types.ModuleType(package)
            stub.__path__ = [path]
            sys.modules[package] = stub
    return importlib.import_module(f"kbert.{name}")


def timed_windows(window, sequences, windows):
    """Median sequences/s of `windows` calls of `window` (each returns once its work is done)
    after one untimed call, and every window's rate."""
    window()
    rates = []
    for _ in range(windows):
        start = time.perf_counter()
        window()
        rates.append(sequences / (time.perf_counter() - start))
    return statistics.median(rates), rates


def kbert_model(case, config, data, args):
    """The compiled kbert model for `case` and its data for `fit` / `predict`: a dict of
    inputs over `args.steps` batches (and targets and sample weights for training, else None)."""
    import keras

    models, optimizer = kbert_module("models"), kbert_module("training.optimizer")
    # Set for each case: `clear_session()` between cases resets the global policy to float32.
    keras.mixed_precision.set_global_policy(
        "float32" if args.dtype == "float32" else f"mixed_{args.dtype}")
    keras.utils.set_random_seed(0)
    backbone = models.BertBackbone(config, attention_implementation=args.attention)
    tile = lambda a: np.tile(a, (args.steps,) + (1,) * (a.ndim - 1))
    inputs = {k: tile(v) for k, v in data["inputs"].items()}
    if case == "infer":
        model = models.BertClassifier(backbone, num_classes=2)
        model.compile(jit_compile=True, steps_per_execution=args.steps_per_execution)
        return model, inputs, None, None
    model = models.BertPretrainer(backbone)
    model.compile(optimizer=optimizer.make_optimizer(1e-4, total_steps=100_000, model=model),
                  jit_compile=True, steps_per_execution=args.steps_per_execution)
    inputs["masked_positions"] = tile(data["masked_positions"])
    targets = {"mlm": tile(data["masked_ids"]), "nsp": tile(data["labels"])}
    weights = {"mlm": tile(data["masked_weights"]), "nsp": np.ones(len(targets["nsp"]))}
    return model, inputs, targets, weights


def keras_window(model, case, inputs, targets, weights, batch):
    """A zero-argument callable: one `fit` (train) or `predict` (infer) of `model` over the
    data `kbert_model` gave, in batches of `batch`."""
    if case == "infer":
        return lambda: model.predict(inputs, batch_size=batch, verbose=0)
    return lambda: model.fit(inputs, targets, sample_weight=weights, batch_size=batch,
                             epochs=1, shuffle=False, verbose=0)


def kbert_window(case, config, data, args):
    """A zero-argument callable: one `fit` (train) or `predict` (infer) over `args.steps`
    batches of `data`; and the dtype the model computes in."""
    model, inputs, targets, weights = kbert_model(case, config, data, args)
    return (keras_window(model, case, inputs, targets, weights, args.batch),
            model.backbone.compute_dtype)


def hf_window(case, config, data, args, compiled):
    """A zero-argument callable: `args.steps` steps of Hugging Face's BERT, then a sync; and
    the dtype autocast computes in."""
    import torch
    import transformers

    torch.manual_seed(0)
    device = torch_device()
    torch.backends.cuda.matmul.allow_tf32 = True
    hf_config = transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
        intermediate_size=config.intermediate_size, num_labels=2,
        hidden_act={"gelu": "gelu", "gelu_tanh": "gelu_new"}[config.hidden_act],
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, layer_norm_eps=config.layer_norm_eps,
        hidden_dropout_prob=config.hidden_dropout,
        attention_probs_dropout_prob=config.attention_dropout)
    tensor = lambda a: torch.from_numpy(np.asarray(a)).long().to(device)
    inputs = {"input_ids": tensor(data["inputs"]["token_ids"]),
              "token_type_ids": tensor(data["inputs"]["segment_ids"]),
              "attention_mask": tensor(data["inputs"]["padding_mask"])}
    autocast = lambda: (contextlib.nullcontext() if args.dtype == "float32"
                        else torch.autocast(device, dtype=getattr(torch, args.dtype)))
    if case == "infer":
        model = transformers.BertForSequenceClassification(hf_config).to(device).eval()
        forward = torch.compile(model, backend=args.compile_backend) if compiled else model

        def step():
            with torch.inference_mode(), autocast():
                return forward(**inputs).logits.cpu()  # to the host, as kbert's predict
    else:
        model = transformers.BertForPreTraining(hf_config).to(device).train()
        forward = torch.compile(model, backend=args.compile_backend) if compiled else model
        labels = torch.full(data["inputs"]["token_ids"].shape, -100)  # -100: not predicted
        labels.scatter_(1, torch.from_numpy(data["masked_positions"]).long(),
                        torch.from_numpy(data["masked_ids"]).long())
        targets = {"labels": labels.to(device),
                   "next_sentence_label": tensor(data["labels"])}
        no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
        decay = [p for p in model.parameters() if all(p is not q for q in no_decay)]
        adamw = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-4, eps=1e-6, fused=device == "cuda")

        def step():
            with autocast():
                loss = forward(**inputs, **targets).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            adamw.step()
            adamw.zero_grad(set_to_none=True)

    def window():
        for _ in range(args.steps):
            step()
        if device == "cuda":
            torch.cuda.synchronize()

    return window, args.dtype


def torch_device():
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def environment(contestant):
    """The device this contestant computes on, and the versions of what it runs on."""
    if contestant == "kbert":
        import jax
        import keras

        return {"device": jax.devices()[0].device_kind,
                "versions": {"jax": jax.__version__, "keras": keras.__version__}}
    import torch
    import transformers

    return {"device": torch.cuda.get_device_name() if torch_device() == "cuda" else "cpu",
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__}}


def measure(case, config, args):
    """The JSON answer for one case of this process's contestant."""
    answer = {"contestant": args.contestant, "case": case, **environment(args.contestant)}
    if case == "peak":
        # JAX computes on its default device; PyTorch is told which.
        where = ({"framework": "kbert"} if args.contestant == "kbert"
                 else {"framework": "hugging_face", "device": torch_device()})
        answer["gflops"] = flops.best_matmul_gflops(sizes=args.matmul_sizes, dtype=args.dtype,
                                                    seconds=args.matmul_seconds, **where)
        return answer
    data = contestants.random_batch(config, args.batch, args.seq, masked=args.masked)
    if args.contestant == "kbert":
        window, compute_dtype = kbert_window(case, config, data, args)
    else:
        window, compute_dtype = hf_window(case, config, data, args,
                                          args.contestant == "hf_compile")
    rate, rates = timed_windows(window, args.steps * args.batch, args.windows)
    flops_case = "pretrain" if case == "train" else "infer"
    answer.update(sequences_per_s=rate, windows=rates, compute_dtype=compute_dtype,
                  flops_per_sequence=flops.case_flops(flops_case, config, args.seq, args.masked))
    return answer


def main(argv=None):
    """Each case in turn, one JSON line each; a case's model is freed before the next."""
    args = parse(argv)
    if args.contestant == "kbert":
        os.environ["KERAS_BACKEND"] = "jax"  # before Keras loads: the image has no TensorFlow
        import keras
    config = kbert_module("config").BertConfig.preset(args.preset)
    for case in args.cases:
        print(json.dumps(measure(case, config, args)), flush=True)
        gc.collect()
        if args.contestant == "kbert":
            keras.backend.clear_session()
        elif torch_device() == "cuda":
            import torch

            torch.cuda.empty_cache()


def add_model_options(parser):
    """The options that fix the model and its batches (shared with `benchmarks.gpu_profile`)."""
    parser.add_argument("--preset", default="base")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--masked", type=int, default=20, help="MLM predictions per sequence")
    parser.add_argument("--steps", type=int, default=20, help="batches per timed window")
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16",
                                                                "float32"])
    parser.add_argument("--attention", default="auto", help="kbert's attention_implementation")
    parser.add_argument("--steps-per-execution", type=int, default=1,
                        help="kbert's compile(steps_per_execution=): batches per compiled call")


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("contestant", choices=CONTESTANTS)
    parser.add_argument("cases", nargs="+", choices=CASES)
    add_model_options(parser)
    parser.add_argument("--compile-backend", default="inductor",
                        help="torch.compile's backend for hf_compile")
    parser.add_argument("--matmul-sizes", type=int, nargs="+", default=[2048, 4096, 8192])
    parser.add_argument("--matmul-seconds", type=float, default=flops.MATMUL_SECONDS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    main()
