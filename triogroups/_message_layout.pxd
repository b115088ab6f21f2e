# Message's layout for Cython, shared by every compiled-core module that reads a message's
# slots (``from triogroups._message_layout cimport Message`` in its .pxd). Declarations only:
# this file has no .py beside it and compiles to nothing; `triogroups.message.Message` stays a
# plain __slots__ class, whose slots Python code reads fastest.
#
# A __slots__ class stores its slots after the object header as pointers, sorted by name.
# `check_size error` makes a compiled module's import fail if the size differs (a slot added
# or removed); tests/test_compiled_core.py names the layout. The field accessors read and
# replace slots that are set: a slot a new object has not had set yet is NULL, which they do
# not expect (replacing one releases the old value). So a compiled module makes messages
# with `new_message` below, which sets all five in C, never with ``Message.__new__`` and
# slot writes.
#
# `new_message` has the name and arguments of `triogroups.message.new_message`, so that a
# compiled-core module's .py calls it as ``message.new_message(...)`` after ``from triogroups
# import message``, and its .pxd makes that name this file (``cimport
# triogroups._message_layout as message``): the .py, run as it is, calls the Python function;
# compiled, the same line is this C constructor.
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

    static PyObject *TGMessage_New(PyObject *type, PyObject *dest, PyObject *src,
                                   PyObject *flags, PyObject *headers, PyObject *payload) {
        /* tp_alloc zeroes the slots and tracks the object for the GC, as object.__new__ */
        TGMessageObject *msg = (TGMessageObject *)((PyTypeObject *)type)->tp_alloc(
            (PyTypeObject *)type, 0);
        if (msg == NULL) return NULL;
        Py_INCREF(dest); msg->dest = dest;
        Py_INCREF(src); msg->src = src;
        Py_INCREF(flags); msg->flags = flags;
        Py_INCREF(headers); msg->headers = headers;
        Py_INCREF(payload); msg->payload = payload;
        return (PyObject *)msg;
    }
    """
    ctypedef class triogroups.message.Message [object TGMessageObject, check_size error]:
        cdef object dest
        cdef object flags
        cdef object headers
        cdef object payload
        cdef object src

    Message _new_message "TGMessage_New" (
        object cls, object dest, object src, object flags, object headers, object payload)


cdef inline Message new_message(object dest, object src, object flags, object headers, object payload):
    """`triogroups.message.new_message` in C: a message with every slot set."""
    return _new_message(Message, dest, src, flags, headers, payload)
