# Cython's types for _handoff.py (pure-Python mode: this file augments the .py, which stays
# the reference and runs as it is when the module is not compiled). The .py turns annotation
# typing off: the types are the ones declared here. Flags and seqnos stay objects (ints of
# any size, as a peer sent them); the batch's index is a C integer.

import cython

from triogroups._message_layout cimport Message

cdef object _STATE
cdef object _SEQNO
cdef object _RPC
cdef object _OOB
cdef object _TAGGED
cdef object _new

@cython.locals(delivered=dict, run_src=object, last=object, end=Py_ssize_t, item=object,
               msg=Message, headers=dict, src=object, flags=object, value=object, body=object,
               seqno=object)
cpdef Py_ssize_t ready_run(list batch, Py_ssize_t i, list out, Py_ssize_t limit, object align,
                           bint allow_pickle) except -1
