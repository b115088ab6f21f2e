# Cython's types for _wire_loop.py (pure-Python mode: this file augments the .py, which stays
# the reference and runs as it is when the module is not compiled). Only the loops' containers
# and counters are typed; flags stay objects, since a hostile peer may send any int. The .py
# turns Cython's annotation typing off (its header line): the types are the ones declared here,
# where Cython would read the annotation `list[Message]` as a container of the declared
# extension type, a different type from the `list` declared for it.

import cython

# Message's layout (its slots read from the object, not through getattr): the one declaration
# of it, shared with the other compiled-core modules.
from triogroups._message_layout cimport Message

cdef object _new

@cython.locals(entries=list, m=Message, msrc=object)
cpdef list encode_entries(list messages, object src)

@cython.locals(msgs=list, size=Py_ssize_t, hdrs=object, msrc=object, msg=object)
cpdef list decode_messages(tuple entries, object dest, object src)

@cython.locals(pid=object, raw=object)
cdef _convert_headers(dict hdrs)
