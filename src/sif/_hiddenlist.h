/* new_list_hidden(): a list filled slot by slot, out of the garbage collector's sight
 * until it is full (for sif._dirc, sif._treec and sif.index._readc; include after
 * Python.h).
 *
 * A list made with PyList_New(n) holds n empty slots until it is filled. Should an
 * allocation meanwhile run a collection (any new tracked object: a tuple, an error), a
 * finalizer could find the list through gc.get_objects() and read an empty slot: a
 * crash (tests/test_c_half_made.py). The caller fills every slot, then calls
 * PyObject_GC_Track on it exactly once before handing it out; on an error it is freed
 * with Py_DECREF as any list. */
#ifndef SIF_HIDDENLIST_H
#define SIF_HIDDENLIST_H

static PyObject *new_list_hidden(Py_ssize_t n) {
    PyObject *list = PyList_New(n);
    if (list != NULL)
        PyObject_GC_UnTrack(list);
    return list;
}

#endif
