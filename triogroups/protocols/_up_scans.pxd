# Cython's types for _up_scans.py (pure-Python mode: this file augments the .py, which stays
# the reference and runs as it is when the module is not compiled). The .py turns annotation
# typing off: the types are the ones declared here. Byte counts are C integers; flags stay
# objects (an int of any size).

import cython

from triogroups._message_layout cimport Message

cdef object _NO_FC

@cython.locals(total=Py_ssize_t, msg=Message)
cpdef Py_ssize_t multicast_bytes(list batch, object pid) except -2

@cython.locals(controls=bint, run_src=object, run_bytes=Py_ssize_t, msg=Message, src=object)
cpdef bint bytes_by_sender(list batch, object pid, bint multicast, dict used) except -1

@cython.locals(msg=Message)
cpdef bint any_flagged(list batch, object flags) except -1
