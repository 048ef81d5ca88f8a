/*
 * A tiny FTN12 AsyncSteps engine in C: the foreign implementation that the
 * tests of ffi.Wrap run Go code on. It is single-threaded and driven by an
 * event queue that the tests turn (cengine_run); every step runs in an event
 * of its own.
 *
 * It implements what the tests need: add, parallel (branches run one after
 * another, which FTN12 2.2.1 allows), stateVariable, stack, success,
 * handle_error, setCancel, waitExternal, loop, repeat, breakLoop,
 * continueLoop, execute, cancel, rootId, isValid, newInstance and free. The
 * other entries are NULL.
 *
 * As with stepvm, C has no exceptions: handle_error, breakLoop and
 * continueLoop called by a running step take effect when its function
 * returns. success and handle_error called outside of any call complete a
 * step that waits for an external event.
 *
 * Steps, handles and roots are never freed or reused until cengine_reset,
 * so a call through a stale handle reads memory that says it is stale.
 * Misuse is counted (cengine_misuses); a step's own misuse during its call
 * also fails it with InternalError; any other is ignored.
 */

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cengine.h"

enum { K_STEP, K_PARALLEL, K_LOOP, K_REPEAT, K_ITER };
enum { P_NONE, P_ERROR, P_BREAK, P_CONTINUE };

typedef struct root root;
typedef struct step step;

typedef struct handle
{
    FutoInAsyncSteps base;
    root* r;
    step* s; /* NULL: the root itself */
    unsigned gen;
} handle;

/* Memory handed out by stack, freed when its step ends. */
typedef struct block
{
    struct block* next;
    void (*cleanup)(void* value);
    max_align_t data[];
} block;

struct step
{
    int kind;
    root* r;
    handle* h;
    unsigned gen; /* == h->gen while the step lives */
    step* parent; /* the frame it runs in; NULL: level 0 */
    step* next;   /* in the queue it waits in */
    step* head;   /* its sub-steps (a parallel's branches) not run yet */
    step* tail;

    FutoInAsyncSteps_execute_callback f;
    FutoInAsyncSteps_error_callback eh;
    void* data;
    void (*loop_f)(FutoInAsyncSteps* bsi, void* data);
    void (*repeat_f)(FutoInAsyncSteps* bsi, void* data, size_t i);
    size_t count, i;
    char label[32];
    FutoInAsyncSteps_cancel_callback ch;
    void* ch_data;
    block* stack;

    int active;  /* a frame: started and not ended */
    int in_call; /* its function or error handler runs */
    int waiting; /* for an external event */
    int succeeded;
    int eh_done;
    int pend; /* what its call raised */
    char pend_arg[32];
};

typedef struct var
{
    struct var* next;
    char* name;
    void* value;
    void* data;
    void (*cleanup)(void* data, void* value);
} var;

struct root
{
    handle h;
    unsigned gen;
    int freed;
    int running;
    int scheduled;
    step* head; /* level 0 */
    step* tail;
    step* top; /* innermost frame; NULL: level 0 */
    FutoInArgs args; /* the values for the next step */
    var* vars;
    FutoInAsyncSteps_error_callback ueh;
    void* ueh_data;
    int result;
    char code[32];
};

static const FutoInAsyncStepsAPI api;

// ---------------------------------------------------------------------------
// Memory that lives until cengine_reset, the event queue, misuse.

typedef struct mem
{
    struct mem* next;
    max_align_t data[];
} mem;

static mem* all;

static void* eng_new(size_t n)
{
    mem* m = calloc(1, sizeof(mem) + n);
    if (!m) {
        abort();
    }
    m->next = all;
    all = m;
    return m->data;
}

static char* eng_strdup(const char* s)
{
    char* d = eng_new(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

typedef struct event
{
    struct event* next;
    void (*fn)(void* arg);
    void* arg;
} event;

static event* ev_head;
static event* ev_tail;

static void post(void (*fn)(void*), void* arg)
{
    event* e = calloc(1, sizeof(event));
    if (!e) {
        abort();
    }
    e->fn = fn;
    e->arg = arg;
    if (ev_tail) {
        ev_tail->next = e;
    } else {
        ev_head = e;
    }
    ev_tail = e;
}

int cengine_run(void)
{
    int n = 0;
    while (ev_head) {
        event* e = ev_head;
        ev_head = e->next;
        if (!ev_head) {
            ev_tail = NULL;
        }
        e->fn(e->arg);
        free(e);
        n++;
    }
    return n;
}

static int misuses;
static char last_misuse[128];

/* misuse counts a misuse; made by step s during its call, it fails s. */
static void misuse(step* s, const char* what)
{
    misuses++;
    snprintf(last_misuse, sizeof(last_misuse), "%s", what);
    if (s && s->in_call && s->pend == P_NONE) {
        s->pend = P_ERROR;
        snprintf(s->pend_arg, sizeof(s->pend_arg), "InternalError");
    }
}

int cengine_misuses(void)
{
    return misuses;
}

const char* cengine_last_misuse(void)
{
    return last_misuse;
}

static void reset_args(FutoInArgs* a)
{
    for (int i = 0; i < 4; i++) {
        futoin_reset_binval(&a->args[i]);
    }
}

// ---------------------------------------------------------------------------
// Roots, steps, handles.

static void init_handle(handle* h, root* r, step* s, unsigned gen)
{
    const FutoInAsyncStepsAPI* p = &api;
    memcpy((void*)&h->base.api, &p, sizeof(p)); /* api is a const member */
    h->r = r;
    h->s = s;
    h->gen = gen;
}

static root* new_root(void)
{
    root* r = eng_new(sizeof(root));
    r->gen = 1;
    init_handle(&r->h, r, NULL, 1);
    return r;
}

FutoInAsyncSteps* cengine_new_root(void)
{
    return &new_root()->h.base;
}

static step* new_step(root* r, int kind)
{
    step* s = eng_new(sizeof(step));
    s->kind = kind;
    s->r = r;
    s->gen = 1;
    s->h = eng_new(sizeof(handle));
    init_handle(s->h, r, s, 1);
    return s;
}

/* resolve returns 1 and the root and step (NULL: the root) a live handle
 * names, 0 for a stale or foreign one. */
static int resolve(FutoInAsyncSteps* bsi, root** r, step** s)
{
    if (!bsi || bsi->api != &api) {
        return 0;
    }
    handle* h = (handle*)bsi;
    if (h->s ? h->s->gen != h->gen : h->r->gen != h->gen || h->r->freed) {
        return 0;
    }
    *r = h->r;
    *s = h->s;
    return 1;
}

static void enqueue(root* r, step* owner, step* s)
{
    step** head = owner ? &owner->head : &r->head;
    step** tail = owner ? &owner->tail : &r->tail;
    s->next = NULL;
    if (*tail) {
        (*tail)->next = s;
    } else {
        *head = s;
    }
    *tail = s;
}

/* drop discards steps that never ran: their handles turn stale. */
static void drop(step** head, step** tail)
{
    for (step* q = *head; q; q = q->next) {
        drop(&q->head, &q->tail);
        q->gen++;
    }
    *head = *tail = NULL;
}

// ---------------------------------------------------------------------------
// Execution.

static void resume(void* arg);
static void raise_error(step* s, const char* code);

static void schedule(root* r)
{
    if (!r->scheduled) {
        r->scheduled = 1;
        post(resume, r);
    }
}

/* end_frame ends step s: its queue is dropped, its stack freed, its
 * handles turn stale. */
static void end_frame(step* s)
{
    drop(&s->head, &s->tail);
    while (s->stack) {
        block* b = s->stack;
        s->stack = b->next;
        if (b->cleanup) {
            b->cleanup(b->data);
        }
        free(b);
    }
    s->active = 0;
    s->gen++;
}

/* cancel_twice makes cancel_frame call each handler twice, as a faulty
 * engine would: the handler's owner must not run it again. */
static int cancel_twice;

void cengine_cancel_twice(int on)
{
    cancel_twice = on;
}

static void cancel_frame(step* s)
{
    FutoInAsyncSteps_cancel_callback ch = s->ch;
    if (ch) {
        s->ch = NULL;
        ch(&s->h->base, s->ch_data);
        if (cancel_twice) {
            ch(&s->h->base, s->ch_data);
        }
    }
}

static void finish(root* r, int result, const char* code)
{
    drop(&r->head, &r->tail);
    r->top = NULL;
    r->running = 0;
    reset_args(&r->args);
    r->result = result;
    snprintf(r->code, sizeof(r->code), "%s", code ? code : "");
    if (result == 2 && r->ueh) {
        r->ueh(&r->h.base, r->ueh_data, r->code);
    }
}

/* complete ends frame s with success: the values in r->args go on. */
static void complete(step* s)
{
    root* r = s->r;
    r->top = s->parent;
    if (s->kind != K_STEP) {
        reset_args(&r->args);
    }
    end_frame(s);
    schedule(r);
}

static void loop_ctl(step* s, int brk, const char* label_in)
{
    root* r = s->r;
    char label[32];
    snprintf(label, sizeof(label), "%s", label_in);
    step* l = s;
    while (l && !((l->kind == K_LOOP || l->kind == K_REPEAT) && (!label[0] || !strcmp(l->label, label)))) {
        l = l->parent;
    }
    if (!l) {
        misuse(NULL, "breakLoop or continueLoop outside of a loop with that label");
        raise_error(s, "InternalError");
        return;
    }
    for (step* f = s; f != l;) {
        step* p = f->parent;
        cancel_frame(f);
        end_frame(f);
        f = p;
    }
    r->top = l;
    reset_args(&r->args);
    if (brk) {
        complete(l);
    } else {
        schedule(r);
    }
}

/* after_call settles what the function of s (a step or a loop iteration)
 * left once it has returned. */
static void after_call(step* s)
{
    if (!s->active) { /* the call canceled or freed the root */
        return;
    }
    int pend = s->pend;
    s->pend = P_NONE;
    switch (pend) {
    case P_ERROR:
        raise_error(s, s->pend_arg);
        return;
    case P_BREAK:
    case P_CONTINUE:
        loop_ctl(s, pend == P_BREAK, s->pend_arg);
        return;
    }
    if (s->succeeded) {
        complete(s);
    } else if (s->head) {
        schedule(s->r);
    } else if (!s->waiting) {
        reset_args(&s->r->args); /* implicit success: no values */
        complete(s);
    }
}

/* raise_error unwinds from frame s with code (FTN12 1.2): each frame's
 * cancel handler, then its error handler, which may settle the error. */
static void raise_error(step* s, const char* code_in)
{
    root* r = s->r;
    char code[32];
    snprintf(code, sizeof(code), "%s", code_in);
    reset_args(&r->args);
    for (step* f = s; f;) {
        step* p = f->parent;
        drop(&f->head, &f->tail);
        cancel_frame(f);
        if (f->eh && !f->eh_done) {
            f->eh_done = 1;
            f->waiting = 0;
            f->succeeded = 0;
            r->top = f;
            f->in_call = 1;
            f->eh(&f->h->base, f->data, code);
            f->in_call = 0;
            if (!f->active) {
                return;
            }
            if (f->pend == P_ERROR) {
                f->pend = P_NONE;
                snprintf(code, sizeof(code), "%s", f->pend_arg);
            } else if (f->pend != P_NONE) {
                after_call(f);
                return;
            } else if (f->succeeded) {
                complete(f);
                return;
            } else if (f->head) { /* FTN12 1.2.1: the handler's steps run as f's */
                schedule(r);
                return;
            }
        }
        end_frame(f);
        f = p;
    }
    finish(r, 2, code);
}

static void call_step(step* s)
{
    root* r = s->r;
    FutoInArgs in = r->args;
    memset(&r->args, 0, sizeof(r->args));
    s->in_call = 1;
    s->f(&s->h->base, s->data, &in);
    s->in_call = 0;
    reset_args(&in);
    after_call(s);
}

static void iterate(step* l)
{
    root* r = l->r;
    if (l->kind == K_REPEAT && l->i >= l->count) {
        complete(l);
        return;
    }
    step* it = new_step(r, K_ITER);
    it->parent = l;
    it->active = 1;
    r->top = it;
    size_t i = l->i++;
    it->in_call = 1;
    if (l->kind == K_LOOP) {
        l->loop_f(&it->h->base, l->data);
    } else {
        l->repeat_f(&it->h->base, l->data, i);
    }
    it->in_call = 0;
    after_call(it);
}

/* resume runs the next thing of the innermost frame: its next sub-step,
 * its next iteration, or its completion once its sub-steps are done. */
static void resume(void* arg)
{
    root* r = arg;
    r->scheduled = 0;
    if (!r->running) {
        return;
    }
    step* f = r->top;
    if (f && (f->kind == K_LOOP || f->kind == K_REPEAT)) {
        iterate(f);
        return;
    }
    step** head = f ? &f->head : &r->head;
    step* s = *head;
    if (!s) {
        if (!f) {
            finish(r, 1, NULL);
        } else if (!f->waiting && !f->in_call) {
            complete(f);
        }
        return;
    }
    *head = s->next;
    if (!*head) {
        *(f ? &f->tail : &r->tail) = NULL;
    }
    s->next = NULL;
    s->parent = f;
    s->active = 1;
    r->top = s;
    if (f && f->kind == K_PARALLEL) {
        reset_args(&r->args); /* a branch gets no values */
    }
    if (s->kind == K_STEP) {
        call_step(s);
    } else {
        schedule(r); /* a parallel's branches, or a loop's iterations */
    }
}

static void cancel_root(root* r)
{
    for (step* f = r->top; f;) {
        step* p = f->parent;
        drop(&f->head, &f->tail);
        cancel_frame(f);
        end_frame(f);
        f = p;
    }
    finish(r, 3, NULL);
}

// ---------------------------------------------------------------------------
// The function table.

/* target returns 1 and where steps added through bsi go (*owner, NULL for
 * the root's level 0), or 0 for misuse. */
static int target(FutoInAsyncSteps* bsi, root** r, step** owner, const char* what)
{
    step* s;
    if (!resolve(bsi, r, &s)) {
        misuse(NULL, what);
        return 0;
    }
    if (!s) {
        if ((*r)->running) {
            misuse(NULL, what);
            return 0;
        }
        *owner = NULL;
        return 1;
    }
    if (s->kind == K_PARALLEL && !s->in_call) { /* an accessor: a branch */
        *owner = s;
        return 1;
    }
    if (!s->in_call || s->succeeded || s->pend != P_NONE) {
        misuse(s, what);
        return 0;
    }
    s->waiting = 0;
    *owner = s;
    return 1;
}

static step* add_step(FutoInAsyncSteps* bsi, int kind, void* data, const char* what)
{
    root* r;
    step* owner;
    if (!target(bsi, &r, &owner, what)) {
        return NULL;
    }
    step* s = new_step(r, kind);
    s->data = data;
    enqueue(r, owner, s);
    return s;
}

static void api_add(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_execute_callback f,
        FutoInAsyncSteps_error_callback eh)
{
    step* s = f ? add_step(bsi, K_STEP, data, "add") : NULL;
    if (s) {
        s->f = f;
        s->eh = eh;
    } else if (!f) {
        misuse(NULL, "add with a NULL function");
    }
}

static FutoInAsyncSteps* api_parallel(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_error_callback eh)
{
    step* s = add_step(bsi, K_PARALLEL, data, "parallel");
    if (!s) {
        return NULL;
    }
    s->eh = eh;
    return &s->h->base;
}

static void* api_state_variable(FutoInAsyncSteps* bsi, void* data, const char* name,
        void* (*allocate)(void* data), void (*cleanup)(void* data, void* value))
{
    root* r;
    step* s;
    if (!resolve(bsi, &r, &s) || !name) {
        misuse(NULL, "stateVariable");
        return NULL;
    }
    for (var* v = r->vars; v; v = v->next) {
        if (!strcmp(v->name, name)) {
            return v->value;
        }
    }
    if (!allocate) {
        return NULL;
    }
    var* v = eng_new(sizeof(var));
    v->name = eng_strdup(name);
    v->data = data;
    v->cleanup = cleanup;
    v->value = allocate(data);
    v->next = r->vars;
    r->vars = v;
    return v->value;
}

static void* api_stack(FutoInAsyncSteps* bsi, size_t size, void (*cleanup)(void* value))
{
    root* r;
    step* s;
    if (!resolve(bsi, &r, &s) || !s || !s->active) {
        misuse(NULL, "stack");
        return NULL;
    }
    block* b = calloc(1, sizeof(block) + size);
    if (!b) {
        abort();
    }
    b->cleanup = cleanup;
    b->next = s->stack;
    s->stack = b;
    return b->data;
}

static void take_args(root* r, FutoInArgs* args)
{
    reset_args(&r->args);
    if (args) {
        r->args = *args;
        memset(args, 0, sizeof(*args));
    }
}

static void api_success(FutoInAsyncSteps* bsi, FutoInArgs* args)
{
    root* r;
    step* s;
    if (!resolve(bsi, &r, &s) || !s || !s->active || s->kind == K_LOOP || s->kind == K_REPEAT) {
        misuse(NULL, "success through an invalid handle");
    } else if (s->in_call) {
        if (!s->succeeded && !s->head && s->pend == P_NONE) {
            s->succeeded = 1;
            take_args(r, args);
            return;
        }
        misuse(s, "success twice, or after add");
    } else if (s->waiting && r->top == s && !s->head) {
        s->waiting = 0;
        take_args(r, args);
        complete(s);
        return;
    } else {
        misuse(NULL, "success of a step that does not wait");
    }
    if (args) {
        reset_args(args);
    }
}

static char last_info[256];

const char* cengine_last_error_info(void)
{
    return last_info;
}

static void api_handle_error(FutoInAsyncSteps* bsi, const char* code, const char* info)
{
    snprintf(last_info, sizeof(last_info), "%s", info ? info : "");
    root* r;
    step* s;
    if (!code) {
        code = "InternalError";
    }
    if (!resolve(bsi, &r, &s) || !s || !s->active) {
        misuse(NULL, "handle_error through an invalid handle");
    } else if (s->in_call) {
        if (s->pend == P_NONE) {
            s->pend = P_ERROR;
            snprintf(s->pend_arg, sizeof(s->pend_arg), "%s", code);
        }
    } else if (s->waiting && r->top == s) {
        s->waiting = 0;
        raise_error(s, code);
    } else {
        misuse(NULL, "handle_error of a step that does not wait");
    }
}

/* running returns the step bsi names if its function runs. */
static step* running(FutoInAsyncSteps* bsi, const char* what)
{
    root* r;
    step* s;
    if (!resolve(bsi, &r, &s) || !s || !s->in_call) {
        misuse(NULL, what);
        return NULL;
    }
    return s;
}

static void api_set_cancel(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_cancel_callback ch)
{
    step* s = running(bsi, "setCancel");
    if (s) {
        s->ch = ch;
        s->ch_data = data;
        s->waiting = 1;
    }
}

static void api_wait_external(FutoInAsyncSteps* bsi)
{
    step* s = running(bsi, "waitExternal");
    if (s) {
        s->waiting = 1;
    }
}

static void api_loop(FutoInAsyncSteps* bsi, void* data, void (*f)(FutoInAsyncSteps* bsi, void* data),
        const char* label)
{
    step* s = f ? add_step(bsi, K_LOOP, data, "loop") : NULL;
    if (s) {
        s->loop_f = f;
        snprintf(s->label, sizeof(s->label), "%s", label ? label : "");
    }
}

static void api_repeat(FutoInAsyncSteps* bsi, void* data, size_t count,
        void (*f)(FutoInAsyncSteps* bsi, void* data, size_t i), const char* label)
{
    step* s = f ? add_step(bsi, K_REPEAT, data, "repeat") : NULL;
    if (s) {
        s->repeat_f = f;
        s->count = count;
        snprintf(s->label, sizeof(s->label), "%s", label ? label : "");
    }
}

static void loop_ctl_api(FutoInAsyncSteps* bsi, int pend, const char* label)
{
    step* s = running(bsi, "breakLoop or continueLoop");
    if (s && s->pend == P_NONE) {
        s->pend = pend;
        snprintf(s->pend_arg, sizeof(s->pend_arg), "%s", label ? label : "");
    }
}

static void api_break_loop(FutoInAsyncSteps* bsi, const char* label)
{
    loop_ctl_api(bsi, P_BREAK, label);
}

static void api_continue_loop(FutoInAsyncSteps* bsi, const char* label)
{
    loop_ctl_api(bsi, P_CONTINUE, label);
}

static void api_execute(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_error_callback unhandled_error)
{
    root* r;
    step* s;
    if (!resolve(bsi, &r, &s) || s || r->running) {
        misuse(NULL, "execute");
        return;
    }
    r->running = 1;
    r->result = 0;
    r->ueh = unhandled_error;
    r->ueh_data = data;
    schedule(r);
}

static void api_cancel(FutoInAsyncSteps* bsi)
{
    root* r;
    step* s;
    if (!resolve(bsi, &r, &s) || s) {
        misuse(NULL, "cancel");
        return;
    }
    if (r->running) {
        cancel_root(r);
    }
}

static ptrdiff_t api_root_id(FutoInAsyncSteps* bsi)
{
    root* r;
    step* s;
    return resolve(bsi, &r, &s) ? (ptrdiff_t)r : 0;
}

static int api_is_valid(FutoInAsyncSteps* bsi)
{
    root* r;
    step* s;
    return resolve(bsi, &r, &s);
}

static FutoInAsyncSteps* api_new_instance(FutoInAsyncSteps* bsi)
{
    root* r;
    step* s;
    if (!resolve(bsi, &r, &s)) {
        misuse(NULL, "newInstance");
        return NULL;
    }
    return cengine_new_root();
}

static void api_free(FutoInAsyncSteps* bsi)
{
    root* r;
    step* s;
    if (!resolve(bsi, &r, &s) || s) {
        misuse(NULL, "free");
        return;
    }
    if (r->running) {
        cancel_root(r);
    }
    for (var* v = r->vars; v; v = v->next) {
        if (v->cleanup) {
            v->cleanup(v->data, v->value);
        }
    }
    r->vars = NULL;
    reset_args(&r->args);
    r->freed = 1;
    r->gen++;
}

static const FutoInAsyncStepsAPI api = {{{
        .add = api_add,
        .parallel = api_parallel,
        .stateVariable = api_state_variable,
        .stack = api_stack,
        .success = api_success,
        .handle_error = api_handle_error,
        .setCancel = api_set_cancel,
        .waitExternal = api_wait_external,
        .loop = api_loop,
        .repeat = api_repeat,
        .breakLoop = api_break_loop,
        .continueLoop = api_continue_loop,
        .execute = api_execute,
        .cancel = api_cancel,
        .rootId = api_root_id,
        .isValid = api_is_valid,
        .newInstance = api_new_instance,
        .free = api_free,
}}};

void cengine_free(FutoInAsyncSteps* root)
{
    root->api->free(root);
}

int cengine_result(FutoInAsyncSteps* bsi, char* code, size_t size)
{
    handle* h = (handle*)bsi;
    snprintf(code, size, "%s", h->r->code);
    return h->r->result;
}

// ---------------------------------------------------------------------------
// Trace.

static char* trace;
static size_t trace_len, trace_cap;

void cengine_say(const char* s)
{
    size_t n = strlen(s);
    if (trace_len + n + 2 > trace_cap) {
        trace_cap = 2 * (trace_len + n + 2);
        trace = realloc(trace, trace_cap);
        if (!trace) {
            abort();
        }
    }
    memcpy(trace + trace_len, s, n);
    trace_len += n;
    trace[trace_len++] = '\n';
    trace[trace_len] = 0;
}

static void sayf(const char* fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    cengine_say(buf);
}

const char* cengine_trace(void)
{
    return trace ? trace : "";
}

void cengine_trace_reset(void)
{
    trace_len = 0;
    if (trace) {
        trace[0] = 0;
    }
}

void cengine_reset(void)
{
    while (ev_head) {
        event* e = ev_head;
        ev_head = e->next;
        free(e);
    }
    ev_tail = NULL;
    while (all) {
        mem* m = all;
        all = m->next;
        free(m);
    }
    misuses = 0;
    cancel_twice = 0;
    last_misuse[0] = 0;
    last_info[0] = 0;
    cengine_trace_reset();
}

// ---------------------------------------------------------------------------
// C steps for mixed flows.

static void say_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    cengine_say(data);
}

void cengine_add_say(FutoInAsyncSteps* bsi, const char* line)
{
    bsi->api->add(bsi, eng_strdup(line), say_step, NULL);
}

static int object_cleanups;

static void object_cleanup(FutoInBinaryValue* v)
{
    (void)v;
    object_cleanups++;
}

int cengine_object_cleanups(void)
{
    return object_cleanups;
}

static const FutoInType int32_type = {FTN_TYPE_INT32, NULL};
static const FutoInType double_type = {FTN_TYPE_DOUBLE, NULL};
static const FutoInType str16_type = {FTN_TYPE_STRING16, NULL};
static const FutoInType object_type = {FTN_TYPE_CUSTOM_OBJECT, object_cleanup};
static const char16_t hello16[] = u"h\u00e9llo";
static int object_payload;

/* emit_step succeeds with an INT32, a DOUBLE, a UTF-16 string and a custom
 * object whose cleanup counts. */
static void emit_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &int32_type;
    out.arg0.i32 = -7;
    out.arg1.type = &double_type;
    out.arg1.d = 2.5;
    out.arg2.type = &str16_type;
    out.arg2.cstr16 = hello16;
    out.arg2.length = 5;
    out.arg3.type = &object_type;
    out.arg3.p = &object_payload;
    out.arg3.custom_data = (void*)(uintptr_t)42;
    out.arg3.length = 1;
    bsi->api->success(bsi, &out);
}

void cengine_add_emit(FutoInAsyncSteps* bsi)
{
    bsi->api->add(bsi, NULL, emit_step, NULL);
}

/* check_step prints the values it receives. */
static void check_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    for (int i = 0; i < 4; i++) {
        const FutoInBinaryValue* v = &args->args[i];
        if (!v->type) {
            continue;
        }
        switch (v->type->flags) {
        case FTN_TYPE_INT64:
            sayf("C got int64 %lld", (long long)v->i64);
            break;
        case FTN_TYPE_UINT64:
            sayf("C got uint64 %llu", (unsigned long long)v->u64);
            break;
        case FTN_TYPE_DOUBLE:
            sayf("C got double %g", v->d);
            break;
        case FTN_TYPE_BOOL:
            sayf("C got bool %d", (int)v->b);
            break;
        case FTN_TYPE_STRING:
            sayf("C got string %.*s (%u, NUL-terminated %d)", (int)v->length, v->cstr, v->length,
                    v->cstr[v->length] == 0);
            break;
        case FTN_TYPE_ARRAY | FTN_TYPE_UINT8:
            sayf("C got bytes %.*s (%u)", (int)v->length, (const char*)v->p, v->length);
            break;
        case FTN_TYPE_CUSTOM_OBJECT:
            sayf("C got custom object, cleanup %s", v->type->cleanup ? "set" : "none");
            break;
        default:
            sayf("C got type 0x%02x", v->type->flags);
        }
    }
}

void cengine_add_check(FutoInAsyncSteps* bsi)
{
    bsi->api->add(bsi, NULL, check_step, NULL);
}

static void fail_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    bsi->api->handle_error(bsi, data, "from C");
}

void cengine_add_fail(FutoInAsyncSteps* bsi, const char* code)
{
    bsi->api->add(bsi, eng_strdup(code), fail_step, NULL);
}

typedef struct later
{
    FutoInAsyncSteps* bsi;
    int value;
} later;

static void later_event(void* arg)
{
    later* l = arg;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &int32_type;
    out.arg0.i32 = l->value;
    l->bsi->api->success(l->bsi, &out);
}

/* cengine_complete_later posts an event that completes bsi with value. */
void cengine_complete_later(FutoInAsyncSteps* bsi, int value)
{
    later* l = eng_new(sizeof(later));
    l->bsi = bsi;
    l->value = value;
    post(later_event, l);
}

// ---------------------------------------------------------------------------
// Synchronization primitives of another implementation, used as an engine
// with addSync would: lock from a step of the flow.

typedef struct lock_data
{
    FutoInSync* sync;
    int unlock;
} lock_data;

static void lock_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    lock_data* d = data;
    d->sync->api->lock(bsi, d->sync);
    cengine_say("lock returned");
    if (d->unlock) {
        d->sync->api->unlock(bsi, d->sync);
        cengine_say("unlock returned");
    }
}

void cengine_add_lock(FutoInAsyncSteps* bsi, FutoInSync* sync, int unlock)
{
    lock_data* d = eng_new(sizeof(lock_data));
    d->sync = sync;
    d->unlock = unlock;
    bsi->api->add(bsi, d, lock_step, NULL);
}
