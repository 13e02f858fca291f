"""The docs match the code: the API reference is current and every public Tensor method has a docstring."""
import pathlib, sys
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
from gen_api import render, undocumented  # noqa: E402
from tinycore import Tensor  # noqa: E402

def test_every_public_tensor_method_has_a_docstring():
  assert undocumented(Tensor) == []

def test_api_reference_is_current():
  assert (ROOT / "docs" / "api.md").read_text() == render(), "run `python docs/gen_api.py` to regenerate docs/api.md"

def test_readme_commands_name_files_that_exist():
  lines = (ROOT / "README.md").read_text().split("```")[1].strip().splitlines()[1:3]
  assert len(lines) == 2 and all("scripts/setup.sh" in x for x in lines)
  for token in " ".join(lines).split():
    if token.endswith(".py") or token.endswith(".sh"): assert (ROOT / token).exists(), token
