"""What a machine or a checkout lacks for a command, said in one line that names the fix.

Every command turns these into that line and an exit status, never a
traceback: a missing tool or package, a GPU that is not there, a user or a
permission the sandbox needs. Optional features name the extra that brings
them (`pip install 'tilelab[handout]'`).
"""

from __future__ import annotations

from ..errors import TilelabError


class SetupError(TilelabError):
    """Something this machine or checkout lacks; str() names the fix."""


class MissingPackage(SetupError):
    """An optional Python package (and what it needs from the system) is not installed."""


PDF_STACK = ("the PDF handout needs WeasyPrint and Pango: pip install 'tilelab[handout]' "
             "(Pango: apt install libpango-1.0-0 libpangoft2-1.0-0, or your system's pango package)")


def weasyprint():
    """The WeasyPrint module, or MissingPackage naming how to get it. WeasyPrint
    raises OSError, not ImportError, when Pango itself is missing."""
    try:
        import weasyprint as module
    except (ImportError, OSError) as e:
        raise MissingPackage(f"{PDF_STACK} ({type(e).__name__}: {e})".splitlines()[0]) from None
    return module
