"""`saved_model_cli` with tensorflow-text's ops registered (they are custom ops to TensorFlow):

    python saved_model_cli_text.py run --dir EXPORT/1 --tag_set serve \\
        --signature_def serving_default --input_exprs 'text=["a fine film"]'

Like the model server, it loads the op libraries, not the tensorflow_text Python package.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_client import load_text_op_libraries  # noqa: E402

if __name__ == "__main__":
    from tensorflow.python.tools import saved_model_cli

    load_text_op_libraries()
    sys.argv[0] = "saved_model_cli"
    saved_model_cli.main()
