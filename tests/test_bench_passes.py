"""Pass costs from step times: the slope is a computed pass, the intercept a step of cached passes."""

from cosmos_helpers.bench import pass_costs


def test_pass_costs_recover_a_known_split():
    schedule = "CC" + "C." + ".." + "CC" + ".C" + ".." + "CC"
    per_step = [0.1 + 2.0 * schedule[2 * i:2 * i + 2].count("C") for i in range(7)]
    per_step[0] += 5.0  # the first step also packs the prompts: left out
    costs = pass_costs(per_step, schedule)
    assert costs["passes"] == 14 and costs["passes_computed"] == 8
    assert abs(costs["computed_pass_s"] - 2.0) < 1e-9 and abs(costs["cached_pass_s"] - 0.05) < 1e-9
    assert abs(costs["cached_to_computed"] - 0.025) < 1e-9


def test_no_split_without_variety_or_with_uneven_steps():
    assert pass_costs([1.0, 1.0, 1.0], "CCCCCC")["computed_pass_s"] is None
    assert pass_costs([1.0, 1.0], "CCC")["computed_pass_s"] is None
