# Cython's types for _wire_loop.py (pure-Python mode: this file augments the .py, which stays
# the reference and runs as it is when the module is not compiled). Only the loops' containers
# and counters are typed; flags stay objects, since a hostile peer may send any int.

import cython

cdef object _new

@cython.locals(msgs=list, size=Py_ssize_t, hdrs=object, msrc=object)
cpdef list decode_messages(tuple entries, object dest, object src)

@cython.locals(pid=object, raw=object)
cdef _convert_headers(dict hdrs)
