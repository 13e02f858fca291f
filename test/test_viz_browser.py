"""The VIZ page as a user sees it: a program runs a small training step with VIZ=1 and serves the page at exit; headless
Chromium (Debian's chromium, driven through chromium-driver by selenium) opens it, clicks a kernel and finds its
source, its rewrite steps and its timing; a screenshot is saved (VIZ_SCREENSHOT names where, else the test's folder).
Skipped where the browser, its driver or selenium is missing (scripts/setup.sh installs them); under scripts/test_all.sh
such a skip fails (test/conftest.py)."""
import os, re, shutil, subprocess, sys
import pytest

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver (scripts/setup.sh installs them)")

PROGRAM = """
import numpy as np
from tinycore import Tensor, TinyJit, nn
rng = np.random.default_rng(0)
l1, l2 = nn.Linear(12, 24), nn.Linear(24, 5)
opt = nn.optim.SGD(nn.state.get_parameters([l1, l2]), lr=0.01)
@TinyJit
@Tensor.train()
def step(x, y):
  opt.zero_grad()
  loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y).backward()
  opt.step()
  return loss
for _ in range(3): print("loss", step(Tensor(rng.standard_normal((6, 12), dtype=np.float32)), Tensor(rng.integers(0, 5, 6).astype(np.int32))).item())
"""

@pytest.fixture
def served(tmp_path):
  """The program above run with VIZ=1 in a process of its own; the URL it prints once it serves the page."""
  env = {**os.environ, "VIZ": "1", "PROFILE_PATH": str(tmp_path / "trace.json")}
  proc = subprocess.Popen([sys.executable, "-c", PROGRAM], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  try:
    lines = []
    for line in proc.stdout:  # type: ignore[union-attr]
      lines.append(line)
      if (m := re.search(r"VIZ: the page is at (http://127\.0\.0\.1:\d+/)", line)): break
    else: pytest.fail("the program ended without serving the page:\n" + "".join(lines))
    yield m.group(1)
  finally:
    proc.terminate()
    proc.wait(timeout=30)

def test_page_in_chromium(served, tmp_path):
  webdriver = pytest.importorskip("selenium.webdriver", reason="no selenium: scripts/setup.sh installs it (the test extra)")
  from selenium.webdriver.common.by import By
  opts = webdriver.ChromeOptions()
  opts.binary_location = CHROMIUM
  for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1500,1000"): opts.add_argument(a)
  driver = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=DRIVER))
  try:
    driver.get(served)
    links = driver.find_elements(By.CSS_SELECTOR, "nav a.kernel-link")
    assert links, "no kernel listed"
    # the kernel with the most FLOPs of the step: a reduce (the matmuls' kernels), named r_...
    link = next(a for a in links if re.search(r"\br_", a.text))
    name = link.text.split()[-1]
    link.click()
    section = driver.find_element(By.CSS_SELECTOR, "section.kernel.shown")
    assert section.find_element(By.TAG_NAME, "h2").text.startswith(name.split("_")[0])
    # its source, rewrite steps (one opened: its rules fired) and timing
    source = section.find_element(By.CSS_SELECTOR, "pre.source")
    assert source.is_displayed() and name in source.text and "for" in source.text
    steps = section.find_elements(By.CSS_SELECTOR, "details.rewrite-step")
    assert len(steps) >= 2 and all(s.is_displayed() for s in steps)
    fired = next(s for s in steps if re.search(r": [1-9]\d* rules fired", s.text))
    fired.find_element(By.TAG_NAME, "summary").click()
    rules = fired.find_element(By.CSS_SELECTOR, "table.rules")
    assert rules.is_displayed() and re.search(r"\w+\.py:\d+", rules.text)
    timing = section.find_element(By.CSS_SELECTOR, "table.timing").text
    assert re.search(r"runs\s+[1-9]\d*, total [\d.,]+ us", timing) and re.search(r"compile\s+[\d.,]+ us", timing)
    # the page's other sections: the timeline and a schedule graph with this kernel's box in it
    driver.find_element(By.CSS_SELECTOR, 'nav a[href="#timeline"]').click()
    assert driver.find_element(By.CSS_SELECTOR, "section.shown svg.timeline").is_displayed()
    path = os.getenv("VIZ_SCREENSHOT") or str(tmp_path / "viz.png")
    link.click()
    driver.save_screenshot(path)
    assert os.path.getsize(path) > 10_000
  finally:
    driver.quit()
