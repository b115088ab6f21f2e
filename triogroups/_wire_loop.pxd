# Cython's types for _wire_loop.py (pure-Python mode: this file augments the .py, which stays
# the reference and runs as it is when the module is not compiled). Only the loops' containers
# and counters are typed; flags stay objects, since a hostile peer may send any int. The .py
# turns Cython's annotation typing off (its header line): the types are the ones declared here,
# where Cython would read the annotation `list[Message]` as a container of the declared
# extension type, a different type from the `list` declared for it.

import cython

# Message's layout, so that the compiled encode loop reads its slots from the object instead
# of through getattr: a __slots__ class stores its slots after the object header as pointers,
# sorted by name. `check_size error` makes the import fail if the size differs (a slot added
# or removed); tests/test_compiled_core.py names the layout. Only reads use it: a slot a new
# object has not had set yet is NULL, which these field accessors do not expect.
cdef extern from *:
    """
    typedef struct {
        PyObject_HEAD
        PyObject *dest;
        PyObject *flags;
        PyObject *headers;
        PyObject *payload;
        PyObject *src;
    } TGMessageObject;
    """
    ctypedef class triogroups.message.Message [object TGMessageObject, check_size error]:
        cdef object dest
        cdef object flags
        cdef object headers
        cdef object payload
        cdef object src

cdef object _new

@cython.locals(entries=list, m=Message, msrc=object)
cpdef list encode_entries(list messages, object src)

@cython.locals(msgs=list, size=Py_ssize_t, hdrs=object, msrc=object, msg=object)
cpdef list decode_messages(tuple entries, object dest, object src)

@cython.locals(pid=object, raw=object)
cdef _convert_headers(dict hdrs)
