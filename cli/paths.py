"""The paths commands take: click's, with a leading ``~`` expanded as the shell would have, because the shell does
not expand it after ``=`` (``--out=~/runs``), in quotes, or in a path pasted from a config file."""

from __future__ import annotations

import os

import click


class UserPath(click.Path):
    """click.Path that reads ``~`` and ``~user`` as the home folder, and refuses what pathlib would read as another
    path: empty text (``.``, the current folder, where ``--scripts ''`` wrote) and, for a file, a trailing slash
    (``-o out.csv/`` wrote the file ``out.csv``)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str):
            if not value:
                self.fail("'' is empty, not a path", param, ctx)
            if not self.dir_okay and value.endswith(("/", os.sep)):
                self.fail(f"{value!r} ends with '/', which names a directory, not a file", param, ctx)
            value = os.path.expanduser(value)
        return super().convert(value, param, ctx)
