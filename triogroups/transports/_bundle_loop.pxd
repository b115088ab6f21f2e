# Cython's types for _bundle_loop.py (pure-Python mode: this file augments the .py, which
# stays the reference and runs as it is when the module is not compiled). The .py turns
# annotation typing off: the types are the ones declared here. Flags stay objects (an int
# of any size); sizes are C integers.

import cython

from triogroups._message_layout cimport Message

cdef object _DONT_BUNDLE
cdef object _DONT_LOOPBACK
cdef object _UNSET

@cython.locals(by_dest=dict, local=list, group=list, to_me=bint, msg=Message, dest=object,
               last=object)
cpdef tuple route(list batch, object me)

@cython.locals(bundles=list, current=list, size=Py_ssize_t, msize=Py_ssize_t, msg=Message)
cpdef list pack(list msgs, Py_ssize_t max_size)
