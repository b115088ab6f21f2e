# Message's layout for Cython, shared by every compiled-core module that reads a message's
# slots (``from triogroups._message_layout cimport Message`` in its .pxd). Declarations only:
# this file has no .py beside it and compiles to nothing; `triogroups.message.Message` stays a
# plain __slots__ class, whose slots Python code reads fastest.
#
# A __slots__ class stores its slots after the object header as pointers, sorted by name.
# `check_size error` makes a compiled module's import fail if the size differs (a slot added
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
