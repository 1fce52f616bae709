"""The Hugging Face side of `benchmarks/quality.py` for SQuAD v1.1: windows from the fast
tokenizer, `AutoModelForQuestionAnswering` trained in `quality_hf.train`, n-best decoding, and
kbert's official-script metric (`kbert.evaluation.squad.squad_metrics`) for both sides.

Windows follow the approach of transformers' examples/pytorch/question-answering/run_qa.py
(`return_overflowing_tokens`, `stride`, `return_offsets_mapping`, `sequence_ids`), written here
to give kbert's (Google's run_squad.py) windows exactly:
  * the question is cut to `max_query_length` (64) sub-tokens, as kbert does; run_qa does not cut;
  * Google's `doc_stride` is the distance between window starts, the tokenizer's `stride` the
    overlap of consecutive windows: with room = length - q - 3 context tokens per window, the
    overlap is room - min(room, doc_stride), so questions are encoded in groups of equal q;
  * a window not holding the answer is trained to point at [CLS] (position 0), as in both
    references; a question whose answer covers no sub-token is left out, as kbert does;
  * decoding takes the `n_best` start and end logits of each window, keeps spans inside the
    context, at most `max_answer_length` (30) long, starting at a token whose window is its
    "max context" window (Google's rule, kbert's `decode_spans`; run_qa omits it), and answers
    with the context characters of the best-scoring span.

The loss is `BertForQuestionAnswering`'s, whose softmax spans the padding too (as Google's
run_squad.py's does), unless the budget's `hf_squad_loss` is "masked": then it leaves the
padding out, as kbert's `BertSpanLabeler` does, so the two sides train the same objective.
"""

import collections

import numpy as np

from benchmarks.quality_hf import ENCODER_KEYS, pad_batch, predict, train


def cut_questions(tok, questions, max_query_length):
    """The questions cut to their first `max_query_length` sub-tokens (text up to the end of
    the last kept sub-token)."""
    enc = tok(questions, add_special_tokens=False, return_offsets_mapping=True)
    return [q if len(offsets) <= max_query_length else q[:offsets[max_query_length - 1][1]]
            for q, offsets in zip(questions, enc["offset_mapping"])]


def windows(tok, examples, length, doc_stride, max_query_length):
    """Every window of every example: dicts with the encoder inputs, `example` (its index),
    `begin` (first context token, in context sub-tokens), `context_start` (its position) and
    `offsets` (context character spans; None outside the context)."""
    questions = cut_questions(tok, [e.question for e in examples], max_query_length)
    sizes = [len(ids) for ids in tok(questions, add_special_tokens=False)["input_ids"]]
    groups = collections.defaultdict(list)
    for n, q in enumerate(sizes):
        groups[q].append(n)
    out = []
    for q, members in groups.items():
        room = length - q - 3
        step = min(room, doc_stride)
        enc = tok([questions[n] for n in members], [examples[n].context for n in members],
                  truncation="only_second", max_length=length, stride=room - step,
                  return_overflowing_tokens=True, return_offsets_mapping=True)
        seen = collections.Counter()
        for w, member in enumerate(enc["overflow_to_sample_mapping"]):
            n = members[member]
            kinds = enc.sequence_ids(w)
            offsets = [o if k == 1 else None for o, k in zip(enc["offset_mapping"][w], kinds)]
            out.append({**{k: enc[k][w] for k in ENCODER_KEYS}, "example": n,
                        "begin": seen[n] * step, "context_start": kinds.index(1),
                        "offsets": offsets})
            seen[n] += 1
    out.sort(key=lambda w: (w["example"], w["begin"]))
    return out


def _context_tokens(window):
    return sum(o is not None for o in window["offsets"])


def add_targets(examples, rows):
    """Start/end positions for training; drops the windows of unmappable answers."""
    by_example = collections.defaultdict(list)
    for w in rows:
        by_example[w["example"]].append(w)
    kept = []
    for n, group in by_example.items():
        text, start = examples[n].answers[0]
        end = start + len(text)
        covering = [w["begin"] + p - w["context_start"] for w in group
                    for p, o in enumerate(w["offsets"]) if o is not None and o[0] < end and
                    o[1] > start]
        if not covering:
            continue
        first, last = min(covering), max(covering)
        for w in group:
            inside = w["begin"] <= first and last < w["begin"] + _context_tokens(w)
            offset = w["context_start"] - w["begin"]
            kept.append({**w, "start_positions": first + offset if inside else 0,
                         "end_positions": last + offset if inside else 0})
    return kept


def max_context(group):
    """For each window of one example, the positions whose token has its max context there
    (score min(left, right) + 0.01·window length; the first window wins ties)."""
    best = {}
    for k, w in enumerate(group):
        size = _context_tokens(w)
        for c in range(w["begin"], w["begin"] + size):
            score = min(c - w["begin"], w["begin"] + size - 1 - c) + 0.01 * size
            if c not in best or score > best[c][0]:
                best[c] = (score, k)
    return [{w["context_start"] + c - w["begin"] for c, (_, k) in best.items() if k == n}
            for n, w in enumerate(group)]


def decode(example, group, logits, n_best=20, max_answer_length=30):
    """The best span's text over the example's windows ("" when no span is valid)."""
    best = (-np.inf, "")
    for w, allowed, out in zip(group, max_context(group), logits):
        starts = np.argsort(out[:, 0])[::-1][:n_best]
        ends = np.argsort(out[:, 1])[::-1][:n_best]
        for s in starts:
            for e in ends:
                if s not in allowed or w["offsets"][e] is None or e < s or \
                        e - s + 1 > max_answer_length:
                    continue
                score = out[s, 0] + out[e, 1]
                if score > best[0]:
                    best = (score, example.context[w["offsets"][s][0]:w["offsets"][e][1]])
    return best[1]


def masked_span_loss(model):
    """`model` (a `BertForQuestionAnswering`) whose `.loss` is the mean of the start and end
    cross-entropies over the real tokens only (padding logits at -1e4, kbert's value)."""
    import types

    import torch

    class MaskedSpanLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, start_positions, end_positions, attention_mask, **inputs):
            out = self.model(attention_mask=attention_mask, **inputs)
            padding = attention_mask == 0
            start = out.start_logits.masked_fill(padding, -1e4)
            end = out.end_logits.masked_fill(padding, -1e4)
            loss = (torch.nn.functional.cross_entropy(start, start_positions)
                    + torch.nn.functional.cross_entropy(end, end_positions)) / 2
            return types.SimpleNamespace(loss=loss)

    return MaskedSpanLoss()


def squad(checkpoint, examples, budget):
    """SQuAD v1.1: trains on kbert's training questions, scores EM/F1 on its dev subset."""
    import torch
    import transformers

    from kbert.data.squad import references
    from kbert.evaluation.squad import squad_metrics

    tok = transformers.AutoTokenizer.from_pretrained(checkpoint)
    torch.manual_seed(budget["seed"])
    model = transformers.AutoModelForQuestionAnswering.from_pretrained(checkpoint)
    shape = (budget["sequence_length"], budget["doc_stride"], budget["max_query_length"])
    rows = add_targets(examples["train"], windows(tok, examples["train"], *shape))
    keys = (*ENCODER_KEYS, "start_positions", "end_positions")
    trained = masked_span_loss(model) if budget.get("hf_squad_loss") == "masked" else model
    record = train(trained, rows, budget, lambda batch: pad_batch(batch, keys, {}))
    dev = examples["dev"]
    rows = windows(tok, dev, *shape)
    logits = predict(model, rows, ENCODER_KEYS,
                     logits_of=lambda o: torch.stack([o.start_logits, o.end_logits], -1))
    grouped = collections.defaultdict(list)
    for w, out in zip(rows, logits):
        grouped[w["example"]].append((w, out))
    predictions = {}
    for n, e in enumerate(dev):
        group = grouped[n]
        predictions[e.id] = decode(e, [w for w, _ in group], [o for _, o in group])
    metrics = squad_metrics(predictions, references(dev), "1.1")
    record["eval_windows"] = len(rows)
    return {"exact_match": float(metrics["exact_match"]), "f1": float(metrics["f1"])}, record
