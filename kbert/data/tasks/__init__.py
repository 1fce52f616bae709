"""Fine-tuning tasks: readers for the standard file formats and the tf.data input pipeline.

Every reader returns a list of examples `(text, label)`, where `text` is a string (single
sentence), a tuple `(text_a, text_b)` (sentence pair), or `(question, (choice_1, ...))`
(multiple choice); `label` is a class id (int), a score (float, regression) or the index of the
right choice. A `TaskData` groups the splits of one data set with what a model needs to know.

Readers
  * `read_glue_tsv` / `read_glue_dir`: GLUE's TSV layouts (CoLA, SST-2, MRPC, QQP, STS-B, MNLI,
    QNLI, RTE, WNLI), recognised from the header or named.
  * `read_table` / `table_task`: CSV, TSV or JSONL files with named text / text-pair / label
    columns; `table_task` reads the label names (or a regression) from the training file.
  * `read_choices` / `choice_task`: multiple-choice questions of one's own (JSON Lines).
  * `read_movie_reviews` / `sentiment_task`: the Rotten Tomatoes snippets of Hutto & Gilbert
    (ICWSM 2014), 10,605 sentences with a mean human score in [-4, 4].
  * `read_mmlu` / `mmlu_task`: 4-way multiple-choice questions (JSONL).
  * `squad_qnli_examples` / `qnli_task`: GLUE's QNLI construction applied to SQuAD v1.1.

A bad row (missing column, unknown label, empty text, unparsable score) raises `DataError`
naming the file and the line: "path:line: what is wrong".

Fixed splits. The sentiment and MMLU files have no official split; kbert assigns each example
by a hash of its identity (`split_of`: CRC-32 of the snippet id / of the question and choices,
modulo 10: 0 → test, 1 → dev, 2-9 → train), so the split never depends on file order, seeds or
the Python version. The QNLI pairs take train from SQuAD's train file and split SQuAD's dev file
into dev and test by article (CRC-32 of the title, even → dev, odd → test).

Input pipeline (`make_dataset`): strings are batched first, then tokenized and packed in the
graph by a `BertPreprocessor`, and each batch is cut to its longest real sequence (dynamic
padding), so short texts never pay for the preprocessor's full `sequence_length`. For training,
`bucket=True` also groups texts of similar length into the same batches.
"""

from kbert.data.tasks.common import DataError, TaskData, hold_out, label_kind, split_of
from kbert.data.tasks.glue import GLUE_LAYOUTS, glue_layout, read_glue_dir, read_glue_tsv
from kbert.data.tasks.tables import read_table, table_task
from kbert.data.tasks.choices import choice_task, read_choices
from kbert.data.tasks.sentiment import MOVIE_REVIEWS_MEMBER, read_movie_reviews, sentiment_task
from kbert.data.tasks.mmlu import mmlu_task, read_mmlu
from kbert.data.tasks.qnli import qnli_task, sentence_spans, squad_qnli_examples
from kbert.data.tasks.registry import TASKS, load_task
from kbert.data.tasks.pipeline import make_dataset

