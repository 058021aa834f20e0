"""Choices that also take the other spelling of a choice: ``analyze --by`` names a column (``module_name``) where
``diff --level`` names a level (``module``), and a user types one command's word in the other."""

from __future__ import annotations

import click


class ChoiceWithAliases(click.Choice):
    """click.Choice whose ``aliases`` map another word to one of ``choices``; the help lists the choices only."""

    def __init__(self, choices: list[str], aliases: dict[str, str]):
        super().__init__(choices)
        self.aliases = aliases

    def convert(self, value, param, ctx):
        return super().convert(self.aliases.get(value, value), param, ctx)


BY_COLUMN = ChoiceWithAliases(
    ["function", "op", "module_name", "kernel", "call_op"], {"module": "module_name", "function_name": "function"}
)
DIFF_LEVEL = ChoiceWithAliases(["function", "module", "kernel"], {"module_name": "module", "function_name": "function"})
