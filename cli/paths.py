"""The paths commands take: click's, with a leading ``~`` expanded as the shell would have, because the shell does
not expand it after ``=`` (``--out=~/runs``), in quotes, or in a path pasted from a config file."""

from __future__ import annotations

import os

import click


class UserPath(click.Path):
    """click.Path that reads ``~`` and ``~user`` as the home folder."""

    def convert(self, value, param, ctx):
        if isinstance(value, str):
            value = os.path.expanduser(value)
        return super().convert(value, param, ctx)
