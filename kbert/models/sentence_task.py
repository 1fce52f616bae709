"""`BertSentenceTask`: a task on single sentences or sentence pairs that knows which it reads."""

from kbert.models.raw_inputs import text_pairs
from kbert.models.task import BertTask


class BertSentenceTask(BertTask):
    """Base of the sentence classifiers. `sentence_pair` says whether the model reads pairs
    (None: unknown); a `fit` on raw text sets it to the form it was given, once the input passed
    its checks and before training (so checkpoints saved during it keep it); it is saved with
    the model, and `export_saved_model` serves that form unless told otherwise."""

    def __init__(self, inputs, outputs, sentence_pair=None, **kwargs):
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.sentence_pair = None if sentence_pair is None else bool(sentence_pair)

    def task_config(self):
        return {"sentence_pair": self.sentence_pair}

    def _fitting_on(self, text):
        if text is not None:
            self.sentence_pair = text_pairs(text)
