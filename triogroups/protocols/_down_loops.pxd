# Cython's types for _down_loops.py (pure-Python mode: this file augments the .py, which stays
# the reference and runs as it is when the module is not compiled). The .py turns annotation
# typing off: the types are the ones declared here. Flags and seqnos stay objects (ints of any
# size); sizes are C integers.

import cython

from triogroups._message_layout cimport Message
# ``message.new_message`` in the .py: compiled, the C constructor (see _message_layout.pxd)
cimport triogroups._message_layout as message

cdef object _DONT_LOOPBACK
cdef object _NO_RELIABILITY
cdef object _NO_FC

@cython.locals(kept=list, local=list, msg=Message, flags=object, headers=dict)
cpdef tuple number_multicasts(list batch, object seqno, object me, object pid)

@cython.locals(largest=Py_ssize_t, size=Py_ssize_t, msg=Message)
cpdef Py_ssize_t largest_payload(list batch) except -1

@cython.locals(key=object, total=Py_ssize_t, msg=Message, dest=object)
cpdef object flow_cost(list batch, bint multicast)

@cython.locals(total=Py_ssize_t, msg=Message, flags=object)
cpdef Py_ssize_t unlooped_bytes(list batch, object skip) except -1
