# Cython's types for _send_loop.py (pure-Python mode: this file augments the .py, which stays
# the reference and runs as it is when the module is not compiled). The .py turns annotation
# typing off: the types are the ones declared here. Seqnos and flags stay objects (ints).

import cython

from triogroups._message_layout cimport Message
# ``message.new_message`` in the .py: compiled, the C constructor (see _message_layout.pxd)
cimport triogroups._message_layout as message

cdef object _SEQNO
cdef object _UNORDERED

cpdef Message multicast(bytes payload, object seqno)

@cython.locals(msg=Message)
cpdef object stamp(list msgs, object seqno)
