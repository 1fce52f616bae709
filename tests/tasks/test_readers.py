import json
import tarfile

import pytest

from kbert.data import tasks
from kbert.data.tasks import DataError


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ GLUE

def test_glue_layouts_from_headers(tmp_path):
    sst = write(tmp_path / "sst.tsv", "sentence\tlabel\nit 's great \t1\nawful .\t0\n")
    assert tasks.read_glue_tsv(sst) == ("sst-2", [("it 's great ", 1), ("awful .", 0)])
    mrpc = write(tmp_path / "mrpc.tsv", "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                 "1\t11\t12\tHe said so .\tSo he said .\n")
    assert tasks.read_glue_tsv(mrpc) == ("mrpc", [(("He said so .", "So he said ."), 1)])
    mnli_header = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t"
                   "sentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\t"
                   "sentence2\tlabel1\tgold_label\n")
    mnli = write(tmp_path / "mnli.tsv", mnli_header +
                 "0\t1\t1n\tgov\t(x)\t(y)\t(X)\t(Y)\tA man sleeps.\tA man is awake.\t"
                 "contradiction\tcontradiction\n")
    assert tasks.read_glue_tsv(mnli)[1] == [(("A man sleeps.", "A man is awake."), 0)]
    qnli = write(tmp_path / "qnli.tsv", "index\tquestion\tsentence\tlabel\n"
                 "0\tWho?\tHim.\tnot_entailment\n")
    assert tasks.read_glue_tsv(qnli) == ("qnli", [(("Who?", "Him."), 1)])
    sts = write(tmp_path / "sts.tsv", "index\tgenre\tfilename\tyear\told_index\tsource1\t"
                "source2\tsentence1\tsentence2\tscore\n0\tm\tf\t2012\t1\tnone\tnone\ta b\tb a\t"
                "3.800\n")
    assert tasks.read_glue_tsv(sts) == ("sts-b", [(("a b", "b a"), 3.8)])
    cola = write(tmp_path / "cola.tsv", "gj04\t1\t\tThe book is red.\ngj04\t0\t*\tBook red the.\n")
    assert tasks.read_glue_tsv(cola, "CoLA")[1] == [("The book is red.", 1), ("Book red the.", 0)]


def test_glue_dir_builds_a_task_and_skips_unlabelled_test(tmp_path):
    d = tmp_path / "RTE"
    d.mkdir()
    header = "index\tsentence1\tsentence2\tlabel\n"
    write(d / "train.tsv", header + "0\tA.\tB.\tentailment\n1\tC.\tD.\tnot_entailment\n")
    write(d / "dev.tsv", header + "0\tE.\tF.\tentailment\n")
    write(d / "test.tsv", "index\tsentence1\tsentence2\n0\tG.\tH.\n")
    task = tasks.load_task("glue", data_dir=d)
    assert (task.name, task.kind, task.num_classes) == ("rte", "classification", 2)
    assert set(task.splits) == {"train", "dev"} and task.is_pair


@pytest.mark.parametrize("body, message", [
    ("sentence\tlabel\ngood\t1\nbad\t7\n", r"sst\.tsv:3: unknown label '7'"),
    ("sentence\tlabel\ngood\t1\n  \t0\n", r"sst\.tsv:3: empty text"),
    ("sentence\tlabel\ngood\t1\nno label here\n", r"sst\.tsv:3: missing label"),
])
def test_glue_bad_rows_name_file_and_line(tmp_path, body, message):
    path = write(tmp_path / "sst.tsv", body)
    with pytest.raises(DataError, match=message):
        tasks.read_glue_tsv(path, "sst-2")


def test_glue_missing_text_column(tmp_path):
    path = write(tmp_path / "mrpc.tsv", "Quality\t#1 String\n1\tx\n")
    with pytest.raises(DataError, match=r"mrpc\.tsv:1: .*#2 String"):
        tasks.read_glue_tsv(path, "mrpc")
    path = write(tmp_path / "pair.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tx\n")
    with pytest.raises(DataError, match=r"pair\.tsv:2: missing column '#2 String'"):
        tasks.read_glue_tsv(path, "mrpc")


# ------------------------------------------------------------------ CSV / JSONL

def test_csv_and_jsonl_tables(tmp_path):
    csv_path = write(tmp_path / "d.csv", 'q,a,y\n"Is it, really?",Yes,pos\n"multi\nline",No,neg\n'
                     "third,x,pos\n")
    examples = tasks.read_table(csv_path, "q", "a", "y", label_names=["neg", "pos"])
    assert examples == [(("Is it, really?", "Yes"), 1), (("multi\nline", "No"), 0),
                        (("third", "x"), 1)]
    jsonl = write(tmp_path / "d.jsonl", '{"text": "fine", "label": 1}\n\n'
                  '{"text": "meh", "label": 0}\n')
    assert tasks.read_table(jsonl) == [("fine", 1), ("meh", 0)]
    scores = write(tmp_path / "s.jsonl", '{"text": "x", "label": 2.5}\n')
    assert tasks.read_table(scores, regression=True) == [("x", 2.5)]


@pytest.mark.parametrize("name, body, message", [
    ("bad.csv", 'text,label\nok,1\n"two\nlines",1\nbroken,\n', r"bad\.csv:5: missing label"),
    ("bad.csv", "text,label\nok,1,extra\n", r"bad\.csv:2: more fields"),
    ("bad.csv", "txt,label\nok,1\n", r"bad\.csv:1: header lacks the columns \['text'\]"),
    ("bad.jsonl", '{"text": "ok", "label": 1}\n{"label": 0}\n', r"bad\.jsonl:2: missing column"),
    ("bad.jsonl", '{"text": "ok", "label": 1}\n{"text": "x", "label": "pos"}\n',
     r"bad\.jsonl:2: label 'pos' .* not a class id"),
    ("bad.jsonl", '{"text": "ok", "label": 1}\n{oops\n', r"bad\.jsonl:2: not valid JSON"),
])
def test_table_errors_name_file_and_line(tmp_path, name, body, message):
    with pytest.raises(DataError, match=message):
        tasks.read_table(write(tmp_path / name, body))


# ------------------------------------------------------------------ movie reviews

def test_movie_reviews_binary_rule_and_fixed_split(tmp_path):
    rows = ["1\t2.5\tA fine film.", "2\t-1.2\tA dull film.", "3\t0\tA film.",
            "4\t0.1\tSlightly good."]
    inner = tmp_path / "hutto_ICWSM_2014"
    inner.mkdir()
    write(inner / "movieReviewSnippets_GroundTruth.txt", "\r\n".join(rows) + "\r\n")
    with tarfile.open(tmp_path / "hutto_ICWSM_2014.tar.gz", "w:gz") as tar:
        tar.add(inner, arcname="hutto_ICWSM_2014")
    task = tasks.sentiment_task(tmp_path)  # finds the tarball in the directory
    everything = sorted(ex for split in task.splits.values() for ex in split)
    assert everything == sorted([("A fine film.", 1), ("A dull film.", 0),
                                 ("Slightly good.", 1)])  # score 0 dropped
    for ident, text in (("1", "A fine film."), ("2", "A dull film.")):
        split = tasks.split_of(ident)
        assert any(t == text for t, _ in task.splits[split])
    scores = tasks.sentiment_task(inner / "movieReviewSnippets_GroundTruth.txt", regression=True)
    assert sorted(y for s in scores.splits.values() for _, y in s) == [-1.2, 0.0, 0.1, 2.5]


def test_movie_reviews_bad_row(tmp_path):
    path = write(tmp_path / "m.txt", "1\t2.5\tGood.\n2\tabc\tBad score.\n")
    with pytest.raises(DataError, match=r"m\.txt:2: label 'abc' in column 'score' is not a number"):
        tasks.read_movie_reviews(path)
    path = write(tmp_path / "m.txt", "1\t2.5\tGood.\n2\t1.0\n")
    with pytest.raises(DataError, match=r"m\.txt:2: expected 3 tab-separated fields"):
        tasks.read_movie_reviews(path)


def test_a_movie_reviews_directory_is_searched_a_few_folders_down_not_walked_whole(tmp_path):
    """`--data-dir /tmp` searched all of /tmp (rglob) for the file."""
    from kbert.data.tasks.sentiment import SEARCH_DEPTH

    deep = tmp_path.joinpath(*"abcde")
    deep.mkdir(parents=True)
    write(deep / "movieReviewSnippets_GroundTruth.txt", "1\t2.5\tA fine film.\n")
    with pytest.raises(DataError, match=rf"{tmp_path}: no hutto_ICWSM_2014.tar.gz or "
                                        rf"movieReviewSnippets_GroundTruth.txt in it or up to "
                                        rf"{SEARCH_DEPTH} folders below"):
        tasks.read_movie_reviews(tmp_path)
    assert tasks.read_movie_reviews(tmp_path / "a" / "b") == [("1", "A fine film.", 2.5)]


def test_real_movie_reviews_split_sizes():
    task = tasks.sentiment_task()  # the real file (cached after the first fetch)
    sizes = {k: len(v) for k, v in task.splits.items()}
    assert sum(sizes.values()) == 10605 - 37  # 37 sentences score exactly 0
    assert sizes == {"train": 8425, "dev": 1077, "test": 1066}


# ------------------------------------------------------------------ MMLU

def test_mmlu_reader(tmp_path):
    good = {"question": "2+2?", "answer_a": "3", "answer_b": 4, "answer_c": "5",
            "answer_d": "22", "correct_answer": "B"}
    header = {"question": "question", "answer_a": "answer_a", "answer_b": "answer_b",
              "answer_c": "answer_c", "answer_d": "answer_d", "correct_answer": "answer"}
    path = write(tmp_path / "m.jsonl", "\n".join(json.dumps(r) for r in (good, header)) + "\n")
    assert tasks.read_mmlu(path) == [(("2+2?", ("3", "4", "5", "22")), 1)]
    bad = dict(good, correct_answer="E")
    path = write(tmp_path / "m.jsonl", json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r"m\.jsonl:2: unknown label 'E'"):
        tasks.read_mmlu(path)
    bad = {k: v for k, v in good.items() if k != "answer_c"}
    path = write(tmp_path / "m.jsonl", json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r"m\.jsonl:1: missing column 'answer_c'"):
        tasks.read_mmlu(path)


# ------------------------------------------------------------------ QNLI from SQuAD

def test_sentence_spans():
    text = 'It rained. "Why?" he asked. Dr. no; 3 cats. The end'
    spans = tasks.sentence_spans(text)
    assert [text[a:b] for a, b in spans] == ["It rained.", '"Why?" he asked.',
                                            "Dr. no; 3 cats.", "The end"]


def test_squad_qnli_pairs(tmp_path):
    context = "Paris is in France. It has the Louvre. The Seine runs through it."
    squad = {"data": [{"title": "Paris", "paragraphs": [{"context": context, "qas": [
        {"id": "q1", "question": "What museum is in Paris?",
         "answers": [{"text": "the Louvre", "answer_start": context.index("the Louvre")}]},
        {"id": "q2", "question": "Spanning?",  # answer crosses a sentence boundary: skipped
         "answers": [{"text": "France. It", "answer_start": context.index("France. It")}]},
    ]}]}]}
    path = write(tmp_path / "squad.json", json.dumps(squad))
    pairs = [ex for _, ex in tasks.squad_qnli_examples(path)]
    assert pairs[0] == (("What museum is in Paris?", "It has the Louvre."), 1)
    assert pairs[1][1] == 0 and pairs[1][0][1] in ("Paris is in France.",
                                                   "The Seine runs through it.")
    assert len(pairs) == 2
    assert pairs == [ex for _, ex in tasks.squad_qnli_examples(path)]  # deterministic
