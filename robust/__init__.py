"""divopt.robust: uncertainty sets, worst-case oracles, robust counterparts, cutting planes."""
