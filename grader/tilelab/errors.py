"""The one root of the errors a user can cause and fix. Its message says
what went wrong and names the fix; the command line catches it once
(cli.py) and prints that message, never a traceback."""


class TilelabError(Exception):
    """A problem a user can fix, told in one message that names the fix."""
