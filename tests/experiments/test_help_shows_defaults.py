"""Every flag of every subcommand shows its default in --help (issue 49, item 3): a test walks each
command's parser; a required flag, a positional or an on/off switch needs none."""
import argparse

import pytest

from divopt_rag.experiments.cli.main import COMMANDS, build_parser


@pytest.mark.parametrize("path", list(COMMANDS), ids=lambda p: " ".join(p))
def test_every_flag_shows_its_default(path):
    parser = build_parser(path)
    formatter = parser._get_formatter()
    missing = []
    for action in parser._actions:
        if not action.option_strings or action.required or action.nargs == 0 or action.default is argparse.SUPPRESS:
            continue
        if "default" not in formatter._get_help_string(action).lower():
            missing.append(action.option_strings[-1])
    assert not missing, f"divopt-rag {' '.join(path)}: flags whose --help shows no default: {missing}"
    text = parser.format_help()
    assert "(default: None)" not in text  # a default is said in words ("none"), never Python's repr
