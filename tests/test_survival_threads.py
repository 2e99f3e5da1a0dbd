"""``fit_all`` runs its three fits in threads: nothing may be imported for the first time in
them. autograd (under lifelines) walks numpy's namespace while it imports; a thread that
imports a numpy submodule at that moment (scipy's first import does: numpy.testing,
numpy.polynomial, ...) changes it, and the walk fails with ``RuntimeError: dictionary changed
size during iteration`` (the intermittent ``goodput build`` failure in ``failure_fits``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# A cold interpreter runs fit_all while another thread keeps changing numpy's namespace for as
# long as fit_all's thread pool is open (what a first import of a numpy submodule does there),
# with a short switch interval so the threads interleave finely: an import that walks numpy's
# namespace inside the pool then fails every time.
RACE = textwrap.dedent(
    """
    import sys, threading
    sys.setswitchinterval(1e-6)
    import numpy as np
    from analysis.survival import fits
    from sample_data.lifetimes import simulate_lifetimes

    class Churning(fits.ThreadPoolExecutor):
        def __enter__(self):
            self.stop = False
            def churn():
                i = 0
                while not self.stop:
                    setattr(np, f"_churn{i % 50}", i)
                    if i % 50 == 49:
                        for k in range(50):
                            delattr(np, f"_churn{k}")
                    i += 1
            self.churner = threading.Thread(target=churn, daemon=True)
            self.churner.start()
            return super().__enter__()

        def __exit__(self, *exc):
            self.stop = True
            self.churner.join()
            return super().__exit__(*exc)

    fits.ThreadPoolExecutor = Churning
    assert "lifelines" not in sys.modules and "autograd" not in sys.modules
    lt = simulate_lifetimes({"gpu": (0.8, 20000.0)}, 100, np.random.default_rng(0))
    out = fits.fit_all(lt, None)
    print(out["failure_rates"].height, out["survival_curves"].height > 0)
    """
)


def test_fit_all_threads_import_nothing_while_they_run():
    # a cold interpreter: the imports happen once per process; a fit_all whose threads import
    # lifelines fails this in 5 runs of 5
    run = subprocess.run(
        [sys.executable, "-c", RACE], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows, curves = run.stdout.split()
    assert int(rows) == 15 and curves == "True"  # 5 models x strata all, A, B
