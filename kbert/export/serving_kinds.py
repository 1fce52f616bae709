"""How each kind of model is served: one table from the serving kind a model class declares
(`serving_kind`) to the inputs its signatures take and the outputs they return
(`kbert.export.signatures` builds the signatures from it), and the model facts they need (its
number of choices, of classes, its label names)."""

import dataclasses

from kbert.export.task_outputs import (choice_outputs, classifier_outputs, embedding_outputs,
                                       feature_outputs, fill_mask_ids, serve_entities,
                                       serve_fill_mask, serve_spans, span_outputs,
                                       token_outputs)


@dataclasses.dataclass(frozen=True)
class ServingKind:
    """How one kind of model is served. `inputs`: "text" (a sentence, or a pair with
    `sentence_pair=True`), "choices" (`text` + `choices` [batch, num_choices]) or
    "question_context" (`question` + `context`; `serve_text` then takes both).
    `classes`: the model has label classes (so `label_names` apply). `serve_text`: a function
    (module, text) replacing the pack-and-run text path (tasks whose answers need the text);
    `serve_ids`: a function (module, features) replacing the run-and-`outputs` path of token
    ids (a masked LM, which reads its blanks off the ids)."""

    name: str
    inputs: str
    outputs: object
    classes: bool = False
    serve_text: object = None
    serve_ids: object = None


SERVING_KINDS = {
    "classifier": ServingKind("classifier", "text", classifier_outputs, classes=True),
    "multiple_choice": ServingKind("multiple_choice", "choices", choice_outputs),
    "backbone": ServingKind("backbone", "text", embedding_outputs),
    "feature_extractor": ServingKind("feature_extractor", "text", feature_outputs),
    "token_classifier": ServingKind("token_classifier", "text", token_outputs, classes=True,
                                    serve_text=serve_entities),
    "span_labeler": ServingKind("span_labeler", "question_context", span_outputs,
                                serve_text=serve_spans),
    "fill_mask": ServingKind("fill_mask", "text", None, serve_text=serve_fill_mask,
                             serve_ids=fill_mask_ids),
}

def serving_kind_for(model, task=None):
    """The `ServingKind` for `model`: `task` (a name in `SERVING_KINDS`) if given, else the one
    its class declares (`serving_kind`)."""
    if task is not None:
        if task not in SERVING_KINDS:
            raise ValueError(f"task must be one of {sorted(SERVING_KINDS)}, got {task!r}.")
        return SERVING_KINDS[task]
    name = getattr(type(model), "serving_kind", None)
    if name in SERVING_KINDS:
        return SERVING_KINDS[name]
    raise TypeError(f"No serving signature for a {type(model).__name__}; pass task= one of "
                    f"{sorted(SERVING_KINDS)} for a model with the same inputs and outputs (e.g. "
                    "task='classifier' for a model that returns logits [batch, classes]).")


def num_choices(model):
    shape = model.input["token_ids"].shape
    if len(shape) != 3 or shape[1] is None:
        raise ValueError(f"A multiple-choice model needs inputs [batch, num_choices, seq] with "
                         f"a fixed num_choices; got {shape}.")
    return int(shape[1])


def num_classes(model):
    shape = model.output.shape
    if len(shape) not in (2, 3) or shape[-1] is None:
        raise ValueError(f"A classifier must return logits [batch, num_classes] (or [batch, "
                         f"seq, num_classes] for a token classifier), got {shape}.")
    return int(shape[-1])


def label_names_for(task, model, label_names):
    """A classifier's class names, as strings in id order, checked against the model (default:
    "0", "1", ...; a token classifier's own IOB tags); None for the other tasks."""
    if not task.classes:
        if label_names is not None:
            raise ValueError(f"label_names apply to classifiers, not to a {task.name}.")
        return None
    count = num_classes(model)
    if label_names is None and task.serve_text is serve_entities:
        label_names = getattr(model, "label_names", None)
        if label_names is None:
            raise ValueError("A token classifier's export needs label_names (its IOB "
                             "tags, e.g. B-PER) to read entities off the tags.")
    if label_names is None:
        label_names = [str(i) for i in range(count)]
    label_names = [str(n) for n in label_names]
    repeated = sorted({n for n in label_names if label_names.count(n) > 1})
    if repeated:
        raise ValueError(f"The label names repeat {', '.join(map(repr, repeated))}: each class "
                         "needs a name of its own, or its answers could not be told apart.")
    if count > 1 and len(label_names) != count:
        raise ValueError(f"label_names has {len(label_names)} names for a model with "
                         f"{count} classes.")
    return label_names
