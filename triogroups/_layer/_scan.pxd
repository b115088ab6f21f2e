# Cython's types for _scan.py (pure-Python mode: this file augments the .py, which stays the
# reference and runs as it is when the module is not compiled). The .py turns annotation
# typing off: the types are the ones declared here.

import cython

from triogroups._message_layout cimport Message

@cython.locals(msg=Message)
cpdef bint none_carries(list batch, object pid)

@cython.locals(msg=Message)
cpdef bint unicasts_without(list batch, object pid)

@cython.locals(msg=Message)
cpdef bint multicasts_without(list batch, object pid)
