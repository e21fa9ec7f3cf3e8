/* The recording tracer's hot path in C: span and lock-use context managers that append clock readings to a
 * per-thread log of 64-bit words, which profiler/collectors/span_log.py decodes after the run.
 *
 * The Python twin (span_log.py's PySpanLog, PySpan, PyLockUse, PyTable) writes the same words in the same
 * order; tests/profiler/collectors/test_span_log.py runs both on one script and compares the words. The words
 * (see span_log.py for their meaning):
 *   span enter   code (>= 0), wall [, cpu]
 *   span exit    SPAN_EXIT, wall [, cpu]
 *   step         STEP_MARK, step index          (pushed by the tracer's Python step span)
 *   lock taken   LOCK_GOT, code, asked, got
 *   lock freed   LOCK_RELEASED, released
 *   pause        PAUSE, code, start, end         (pushed from Python: the GC collector)
 *   counter      COUNTER, code, time, value's float64 bits
 * A span costs two clock readings and four or six stores; no Python object is made.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>
#include <time.h>

enum { SPAN_EXIT = -1, STEP_MARK = -2, LOCK_GOT = -3, LOCK_RELEASED = -4, PAUSE = -5, COUNTER = -6 };

typedef struct {
    PyObject_HEAD
    int64_t *words;
    Py_ssize_t len, cap;
    Py_ssize_t limit;    /* after an outermost exit with this many words held, on_full() is called */
    int open;            /* spans and lock uses entered and not yet exited on this log */
    int cpu;             /* spans also record the thread's CPU clock */
    PyObject *clock;     /* NULL: CLOCK_MONOTONIC (what time.perf_counter_ns reads); else a callable (tests) */
    PyObject *cpu_clock; /* NULL: CLOCK_THREAD_CPUTIME_ID (time.thread_time_ns); else a callable */
    PyObject *on_full;   /* called with no arguments; its errors are reported, never raised into the engine */
} SpanLog;

typedef struct {
    PyObject_HEAD
    SpanLog *log;
    int64_t code;
} Span;

typedef struct {
    PyObject_HEAD
    SpanLog *log;
    int64_t code;
    PyObject *acquire;
    PyObject *release;
} LockUse;

typedef struct {
    PyObject_HEAD
    PyObject *local;     /* a threading.local: .spans {name or (name, lock): context manager}, .log */
    PyObject *codes;     /* {name: code}, shared by every thread */
    PyObject *miss_span; /* miss_span(name): makes and files the span (first use on a thread) */
    PyObject *miss_lock; /* miss_lock(lock, name) */
    PyObject *miss_code; /* miss_code(name): the code of a new counter name */
} Table;

static PyTypeObject SpanLogType, SpanType, LockUseType, TableType;
static PyObject *str_spans, *str_log;

/* -- clocks ------------------------------------------------------------------------------------------ */

static int read_clock(PyObject *callable, clockid_t id, int64_t *out) {
    if (callable == NULL) {
        struct timespec ts;
        clock_gettime(id, &ts);
        *out = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        return 0;
    }
    PyObject *value = PyObject_CallNoArgs(callable);
    if (value == NULL) return -1;
    long long ns = PyLong_AsLongLong(value);
    Py_DECREF(value);
    if (ns == -1 && PyErr_Occurred()) return -1;
    *out = ns;
    return 0;
}

static inline int wall_now(SpanLog *log, int64_t *out) { return read_clock(log->clock, CLOCK_MONOTONIC, out); }

/* -- the log ----------------------------------------------------------------------------------------- */

static int reserve(SpanLog *log, Py_ssize_t more) {
    if (log->len + more <= log->cap) return 0;
    Py_ssize_t cap = log->cap ? log->cap : 1024;
    while (cap < log->len + more) {
        if (cap > PY_SSIZE_T_MAX / 2 / (Py_ssize_t)sizeof(int64_t)) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    int64_t *words = PyMem_Realloc(log->words, (size_t)cap * sizeof(int64_t));
    if (words == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    log->words = words;
    log->cap = cap;
    return 0;
}

/* Room is reserved only after the last call that can run Python code (a test's clock, a lock's acquire or
 * release), since that code may append to this same log (the GC collector's pauses) and use the room up. */

/* Appends code, wall[, cpu] read now; -1 with an exception set when a clock or the memory failed. */
static int push_mark(SpanLog *log, int64_t code) {
    int64_t wall, cpu = 0;
    if (wall_now(log, &wall) < 0) return -1;
    if (log->cpu && read_clock(log->cpu_clock, CLOCK_THREAD_CPUTIME_ID, &cpu) < 0) return -1;
    if (reserve(log, 3) < 0) return -1;
    int64_t *at = log->words + log->len;
    at[0] = code;
    at[1] = wall;
    if (log->cpu) at[2] = cpu;
    log->len += log->cpu ? 3 : 2;
    return 0;
}

/* After an exit: when nothing is open and the log is full, hand it to on_full (the spill) between spans. */
static void after_exit(SpanLog *log) {
    log->open -= 1;
    if (log->open > 0 || log->len < log->limit || log->on_full == NULL || log->on_full == Py_None) return;
    PyObject *done = PyObject_CallNoArgs(log->on_full);
    if (done == NULL)
        PyErr_WriteUnraisable(log->on_full);
    else
        Py_DECREF(done);
}

static PyObject *SpanLog_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"limit", "cpu", "clock", "cpu_clock", "on_full", NULL};
    Py_ssize_t limit = 1 << 16;
    int cpu = 0;
    PyObject *clock = Py_None, *cpu_clock = Py_None, *on_full = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|npOOO:SpanLog", names, &limit, &cpu, &clock, &cpu_clock,
                                     &on_full))
        return NULL;
    if (limit < 1) {
        PyErr_SetString(PyExc_ValueError, "SpanLog: limit must be at least 1 word");
        return NULL;
    }
    SpanLog *self = (SpanLog *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->limit = limit;
    self->cpu = cpu;
    self->clock = clock == Py_None ? NULL : Py_NewRef(clock);
    self->cpu_clock = cpu_clock == Py_None ? NULL : Py_NewRef(cpu_clock);
    self->on_full = Py_NewRef(on_full);
    return (PyObject *)self;
}

static int SpanLog_traverse(SpanLog *self, visitproc visit, void *arg) {
    Py_VISIT(self->clock);
    Py_VISIT(self->cpu_clock);
    Py_VISIT(self->on_full);
    return 0;
}

static int SpanLog_clear(SpanLog *self) {
    Py_CLEAR(self->clock);
    Py_CLEAR(self->cpu_clock);
    Py_CLEAR(self->on_full);
    return 0;
}

static void SpanLog_dealloc(SpanLog *self) {
    PyObject_GC_UnTrack(self);
    SpanLog_clear(self);
    PyMem_Free(self->words);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t SpanLog_length(SpanLog *self) { return self->len; }

static PyObject *SpanLog_push(SpanLog *self, PyObject *const *args, Py_ssize_t nargs) {
    /* Converted first (an argument's __index__ may run Python code), then appended all at once. */
    int64_t small[8];
    int64_t *words = nargs <= 8 ? small : PyMem_Malloc((size_t)nargs * sizeof(int64_t));
    if (words == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < nargs; i++) {
        long long word = PyLong_AsLongLong(args[i]);
        if (word == -1 && PyErr_Occurred()) {
            if (words != small) PyMem_Free(words);
            return NULL; /* nothing of this call was appended */
        }
        words[i] = word;
    }
    int failed = reserve(self, nargs) < 0;
    if (!failed) {
        memcpy(self->words + self->len, words, (size_t)nargs * sizeof(int64_t));
        self->len += nargs;
    }
    if (words != small) PyMem_Free(words);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

static PyObject *SpanLog_take(SpanLog *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)self->words, self->len * (Py_ssize_t)sizeof(int64_t));
    if (bytes != NULL) self->len = 0;
    return bytes;
}

static PyObject *SpanLog_span(SpanLog *self, PyObject *code_object) {
    long long code = PyLong_AsLongLong(code_object);
    if (code == -1 && PyErr_Occurred()) return NULL;
    if (code < 0) {
        PyErr_SetString(PyExc_ValueError, "SpanLog.span: a span's code must be >= 0");
        return NULL;
    }
    Span *span = PyObject_GC_New(Span, &SpanType);
    if (span == NULL) return NULL;
    span->log = (SpanLog *)Py_NewRef(self);
    span->code = code;
    PyObject_GC_Track(span);
    return (PyObject *)span;
}

static PyObject *SpanLog_lock_use(SpanLog *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "SpanLog.lock_use(lock, code)");
        return NULL;
    }
    long long code = PyLong_AsLongLong(args[1]);
    if (code == -1 && PyErr_Occurred()) return NULL;
    PyObject *acquire = PyObject_GetAttrString(args[0], "acquire");
    if (acquire == NULL) return NULL;
    PyObject *release = PyObject_GetAttrString(args[0], "release");
    if (release == NULL) {
        Py_DECREF(acquire);
        return NULL;
    }
    LockUse *use = PyObject_GC_New(LockUse, &LockUseType);
    if (use == NULL) {
        Py_DECREF(acquire);
        Py_DECREF(release);
        return NULL;
    }
    use->log = (SpanLog *)Py_NewRef(self);
    use->code = code;
    use->acquire = acquire;
    use->release = release;
    PyObject_GC_Track(use);
    return (PyObject *)use;
}

static PyObject *SpanLog_get_open(SpanLog *self, void *Py_UNUSED(closure)) { return PyLong_FromLong(self->open); }
static PyObject *SpanLog_get_cpu(SpanLog *self, void *Py_UNUSED(closure)) { return PyBool_FromLong(self->cpu); }

static PyMethodDef SpanLog_methods[] = {
    {"push", (PyCFunction)(void (*)(void))SpanLog_push, METH_FASTCALL, "push(*words): append words as they are"},
    {"take", (PyCFunction)SpanLog_take, METH_NOARGS, "take() -> bytes: the words held (native int64), and empty"},
    {"span", (PyCFunction)SpanLog_span, METH_O, "span(code): a reusable context manager timing one span name"},
    {"lock_use", (PyCFunction)(void (*)(void))SpanLog_lock_use, METH_FASTCALL,
     "lock_use(lock, code): a reusable context manager acquiring `lock` and timing the wait"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef SpanLog_getset[] = {
    {"open", (getter)SpanLog_get_open, NULL, "spans and lock uses entered and not yet exited", NULL},
    {"cpu", (getter)SpanLog_get_cpu, NULL, "whether spans record the thread's CPU clock too", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods SpanLog_as_sequence = {.sq_length = (lenfunc)SpanLog_length};

static PyTypeObject SpanLogType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "infer_prof.profiler.collectors._span_log.SpanLog",
    .tp_doc = "SpanLog(limit=65536, cpu=False, clock=None, cpu_clock=None, on_full=None): one thread's words",
    .tp_basicsize = sizeof(SpanLog),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = SpanLog_new,
    .tp_traverse = (traverseproc)SpanLog_traverse,
    .tp_clear = (inquiry)SpanLog_clear,
    .tp_dealloc = (destructor)SpanLog_dealloc,
    .tp_methods = SpanLog_methods,
    .tp_getset = SpanLog_getset,
    .tp_as_sequence = &SpanLog_as_sequence,
};

/* -- a span -------------------------------------------------------------------------------------------- */

static int Span_traverse(Span *self, visitproc visit, void *arg) {
    Py_VISIT(self->log);
    return 0;
}

static int Span_clear(Span *self) {
    Py_CLEAR(self->log);
    return 0;
}

static void Span_dealloc(Span *self) {
    PyObject_GC_UnTrack(self);
    Span_clear(self);
    PyObject_GC_Del(self);
}

/* A span or lock use outlives its log only when the garbage collector broke a cycle through them. */
static int cleared(SpanLog *log) {
    if (log != NULL) return 0;
    PyErr_SetString(PyExc_RuntimeError, "this span's log was cleared");
    return 1;
}

static PyObject *Span_enter(Span *self, PyObject *Py_UNUSED(ignored)) {
    if (cleared(self->log) || push_mark(self->log, self->code) < 0) return NULL;
    self->log->open += 1;
    Py_RETURN_NONE;
}

static PyObject *Span_exit(Span *self, PyObject *const *Py_UNUSED(args), Py_ssize_t Py_UNUSED(nargs)) {
    SpanLog *log = self->log;
    if (cleared(log) || push_mark(log, SPAN_EXIT) < 0) return NULL;
    after_exit(log);
    Py_RETURN_NONE; /* None: an exception raised in the block goes on */
}

static PyObject *Span_get_code(Span *self, void *Py_UNUSED(closure)) { return PyLong_FromLongLong(self->code); }

static PyMethodDef Span_methods[] = {
    {"__enter__", (PyCFunction)Span_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))Span_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Span_getset[] = {
    {"code", (getter)Span_get_code, NULL, "the span name's code", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SpanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "infer_prof.profiler.collectors._span_log.Span",
    .tp_doc = "One span name on one thread's log (made by SpanLog.span); reused for every use of the name",
    .tp_basicsize = sizeof(Span),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Span_traverse,
    .tp_clear = (inquiry)Span_clear,
    .tp_dealloc = (destructor)Span_dealloc,
    .tp_methods = Span_methods,
    .tp_getset = Span_getset,
};

/* -- a lock use ---------------------------------------------------------------------------------------- */

static int LockUse_traverse(LockUse *self, visitproc visit, void *arg) {
    Py_VISIT(self->log);
    Py_VISIT(self->acquire);
    Py_VISIT(self->release);
    return 0;
}

static int LockUse_clear(LockUse *self) {
    Py_CLEAR(self->log);
    Py_CLEAR(self->acquire);
    Py_CLEAR(self->release);
    return 0;
}

static void LockUse_dealloc(LockUse *self) {
    PyObject_GC_UnTrack(self);
    LockUse_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *LockUse_enter(LockUse *self, PyObject *Py_UNUSED(ignored)) {
    SpanLog *log = self->log;
    if (cleared(log)) return NULL;
    int64_t asked, got;
    if (wall_now(log, &asked) < 0) return NULL;
    PyObject *taken = PyObject_CallNoArgs(self->acquire);
    if (taken == NULL) return NULL; /* not acquired: nothing recorded */
    Py_DECREF(taken);
    if (wall_now(log, &got) < 0 || reserve(log, 4) < 0) {
        /* Acquired, but unrecordable: release so no one waits forever, and say why. */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyObject *freed = PyObject_CallNoArgs(self->release);
        Py_XDECREF(freed);
        PyErr_Restore(type, value, traceback);
        return NULL;
    }
    int64_t *at = log->words + log->len;
    at[0] = LOCK_GOT;
    at[1] = self->code;
    at[2] = asked;
    at[3] = got;
    log->len += 4;
    log->open += 1;
    Py_RETURN_NONE;
}

static PyObject *LockUse_exit(LockUse *self, PyObject *const *Py_UNUSED(args), Py_ssize_t Py_UNUSED(nargs)) {
    SpanLog *log = self->log;
    if (cleared(log)) return NULL;
    int64_t released;
    int failed = wall_now(log, &released) < 0;
    /* Release whatever happened to the record: a lock held forever would hang the engine. */
    PyObject *type, *value, *traceback;
    if (failed) PyErr_Fetch(&type, &value, &traceback);
    PyObject *freed = PyObject_CallNoArgs(self->release);
    if (failed) {
        Py_XDECREF(freed);
        PyErr_Restore(type, value, traceback);
        return NULL;
    }
    if (freed == NULL) return NULL;
    Py_DECREF(freed);
    if (reserve(log, 2) < 0) return NULL;
    log->words[log->len] = LOCK_RELEASED;
    log->words[log->len + 1] = released;
    log->len += 2;
    after_exit(log);
    Py_RETURN_NONE;
}

static PyMethodDef LockUse_methods[] = {
    {"__enter__", (PyCFunction)LockUse_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))LockUse_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LockUseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "infer_prof.profiler.collectors._span_log.LockUse",
    .tp_doc = "One (lock, name) on one thread's log (made by SpanLog.lock_use); reused for every use",
    .tp_basicsize = sizeof(LockUse),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)LockUse_traverse,
    .tp_clear = (inquiry)LockUse_clear,
    .tp_dealloc = (destructor)LockUse_dealloc,
    .tp_methods = LockUse_methods,
};

/* -- the per-thread lookup ----------------------------------------------------------------------------- */

static PyObject *Table_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"local", "codes", "miss_span", "miss_lock", "miss_code", NULL};
    PyObject *local, *codes, *miss_span, *miss_lock, *miss_code;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!OOO:Table", names, &local, &PyDict_Type, &codes, &miss_span,
                                     &miss_lock, &miss_code))
        return NULL;
    Table *self = (Table *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->local = Py_NewRef(local);
    self->codes = Py_NewRef(codes);
    self->miss_span = Py_NewRef(miss_span);
    self->miss_lock = Py_NewRef(miss_lock);
    self->miss_code = Py_NewRef(miss_code);
    return (PyObject *)self;
}

static int Table_traverse(Table *self, visitproc visit, void *arg) {
    Py_VISIT(self->local);
    Py_VISIT(self->codes);
    Py_VISIT(self->miss_span);
    Py_VISIT(self->miss_lock);
    Py_VISIT(self->miss_code);
    return 0;
}

static int Table_clear(Table *self) {
    Py_CLEAR(self->local);
    Py_CLEAR(self->codes);
    Py_CLEAR(self->miss_span);
    Py_CLEAR(self->miss_lock);
    Py_CLEAR(self->miss_code);
    return 0;
}

static void Table_dealloc(Table *self) {
    PyObject_GC_UnTrack(self);
    Table_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The calling thread's attribute `name` of the threading.local; NULL without an exception when it has none. */
static PyObject *thread_attribute(Table *self, PyObject *name) {
    if (self->local == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this table was cleared");
        return NULL;
    }
    PyObject *value = PyObject_GetAttr(self->local, name);
    if (value == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear();
    return value;
}

/* The thread's context manager under `key`, new ref; NULL without an exception when there is none yet. */
static PyObject *filed(Table *self, PyObject *key) {
    PyObject *spans = thread_attribute(self, str_spans);
    if (spans == NULL) return NULL;
    PyObject *found = PyDict_GetItemWithError(spans, key);
    Py_XINCREF(found);
    Py_DECREF(spans);
    return found;
}

static PyObject *Table_span(Table *self, PyObject *name) {
    PyObject *found = filed(self, name);
    if (found != NULL || PyErr_Occurred()) return found;
    return PyObject_CallOneArg(self->miss_span, name);
}

static PyObject *Table_lock(Table *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "lock(lock, name)");
        return NULL;
    }
    PyObject *key = PyTuple_Pack(2, args[1], args[0]);
    if (key == NULL) return NULL;
    PyObject *found = filed(self, key);
    Py_DECREF(key);
    if (found != NULL || PyErr_Occurred()) return found;
    return PyObject_Vectorcall(self->miss_lock, args, 2, NULL);
}

static PyObject *Table_counter(Table *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "counter(name, value)");
        return NULL;
    }
    double value = PyFloat_AsDouble(args[1]);
    if (value == -1.0 && PyErr_Occurred()) return NULL;
    PyObject *log_object = thread_attribute(self, str_log);
    if (log_object == NULL && PyErr_Occurred()) return NULL;
    PyObject *code_object = PyDict_GetItemWithError(self->codes, args[0]); /* borrowed */
    if (log_object == NULL || code_object == NULL) {
        Py_XDECREF(log_object);
        if (PyErr_Occurred()) return NULL;
        /* A new thread or a new name: Python files them, then this call records as usual. */
        PyObject *made = PyObject_CallOneArg(self->miss_code, args[0]);
        if (made == NULL) return NULL;
        Py_DECREF(made);
        log_object = thread_attribute(self, str_log);
        code_object = PyDict_GetItemWithError(self->codes, args[0]);
        if (log_object == NULL || code_object == NULL) {
            Py_XDECREF(log_object);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "miss_code filed no log or no code");
            return NULL;
        }
    }
    if (!PyObject_TypeCheck(log_object, &SpanLogType)) {
        Py_DECREF(log_object);
        PyErr_SetString(PyExc_TypeError, "the thread's log is not a SpanLog");
        return NULL;
    }
    SpanLog *log = (SpanLog *)log_object;
    long long code = PyLong_AsLongLong(code_object);
    int64_t now, bits;
    memcpy(&bits, &value, sizeof bits);
    if ((code == -1 && PyErr_Occurred()) || wall_now(log, &now) < 0 || reserve(log, 4) < 0) {
        Py_DECREF(log_object);
        return NULL;
    }
    int64_t *at = log->words + log->len;
    at[0] = COUNTER;
    at[1] = code;
    at[2] = now;
    at[3] = bits;
    log->len += 4;
    Py_DECREF(log_object);
    Py_RETURN_NONE;
}

static PyMethodDef Table_methods[] = {
    {"span", (PyCFunction)Table_span, METH_O, "span(name): the calling thread's span of `name`"},
    {"lock", (PyCFunction)(void (*)(void))Table_lock, METH_FASTCALL,
     "lock(lock, name): the calling thread's timed use of `lock`"},
    {"counter", (PyCFunction)(void (*)(void))Table_counter, METH_FASTCALL,
     "counter(name, value): record a sampled value on the calling thread's log"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "infer_prof.profiler.collectors._span_log.Table",
    .tp_doc = "Table(local, codes, miss_span, miss_lock, miss_code): finds the calling thread's spans",
    .tp_basicsize = sizeof(Table),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = Table_new,
    .tp_traverse = (traverseproc)Table_traverse,
    .tp_clear = (inquiry)Table_clear,
    .tp_dealloc = (destructor)Table_dealloc,
    .tp_methods = Table_methods,
};

/* -- the module ---------------------------------------------------------------------------------------- */

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "infer_prof.profiler.collectors._span_log",
    .m_doc = "The recording tracer's spans and lock uses in C (see profiler/collectors/span_log.py).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__span_log(void) {
    static PyTypeObject *types[] = {&SpanLogType, &SpanType, &LockUseType, &TableType};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (PyType_Ready(types[i]) < 0) return NULL;
    str_spans = PyUnicode_InternFromString("spans");
    str_log = PyUnicode_InternFromString("log");
    if (str_spans == NULL || str_log == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "SpanLog", (PyObject *)&SpanLogType) < 0 ||
        PyModule_AddObjectRef(m, "Table", (PyObject *)&TableType) < 0 ||
        PyModule_AddIntConstant(m, "SPAN_EXIT", SPAN_EXIT) < 0 ||
        PyModule_AddIntConstant(m, "STEP_MARK", STEP_MARK) < 0 ||
        PyModule_AddIntConstant(m, "LOCK_GOT", LOCK_GOT) < 0 ||
        PyModule_AddIntConstant(m, "LOCK_RELEASED", LOCK_RELEASED) < 0 ||
        PyModule_AddIntConstant(m, "PAUSE", PAUSE) < 0 || PyModule_AddIntConstant(m, "COUNTER", COUNTER) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
