// A step interpreter driven by a byte program, for ffi's FuzzFFI.
//
// Every callback reads what it does next from one program shared by all
// flows of a run: add sub-steps, succeed with values (some of them
// unusable), fail, set timeouts and cancel handlers, wait for a completion
// scheduled through a kept handle, allocate Stack and state memory, loop,
// break and continue, run branches, make and free roots, take a Sync
// section, and call through handles kept from earlier steps, stale or not,
// including the calls the interface forbids, and, between the loop's
// passes, success and handle_error from another thread. What comes out is
// what the implementation must keep whatever the program: every custom
// object passed to it is cleaned up exactly once, every Stack allocation's
// cleanup runs once with its memory intact, and every state variable
// allocated is cleaned up; the Go side checks the loop's own guarantees. A
// program that runs out ends every step at once and breaks every loop, and
// a budget of callbacks bounds a run whatever the program says.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctest.h"

enum
{
    FZ_SLOTS = 8,     // kept handles
    FZ_OBJS = 1024,   // custom objects per run
    FZ_STACKS = 1024, // Stack allocations per run
    FZ_NEWS = 16,     // roots made with newInstance
    FZ_BUDGET = 2000, // callbacks per run
};

static const uint8_t* prog;
static size_t prog_len, pos;
static int budget;
static FutoInSync* fz_sync;
static FutoInAsyncSteps* slots[FZ_SLOTS];
static FutoInAsyncSteps* news[FZ_NEWS];
static int nnews;

// The first thing that went wrong on the C side; "" while nothing has.
static char problem[256];

static void fail(const char* what, long i)
{
    if (problem[0] == 0) {
        snprintf(problem, sizeof(problem), "%s (%ld)", what, i);
    }
}

// Objects, Stack allocations and state variables go from 0 (unused) to 1
// (handed to stepvm) to 2 (cleaned up).
static uint8_t objs[FZ_OBJS], stacks[FZ_STACKS];
static int nobjs, nstacks, state_allocs, state_cleanups;
// A Stack allocation holds its index in its first 4 bytes and the index's
// low byte in the others.
static size_t stack_size[FZ_STACKS];

static unsigned next(void)
{
    return pos < prog_len ? prog[pos++] : 0;
}

// live reports whether the program goes on: when it does not, steps end
// at once and loops break.
static int live(void)
{
    return budget > 0 && pos < prog_len;
}

static void through(void);

// reenter calls through a kept handle from a callback that stepvm runs
// while it tears something down or converts values, if the program says
// so: such calls must be refused or deferred, never act on half-done work.
static void reenter(void)
{
    if (live() && next() % 4 == 0) {
        budget--;
        through();
    }
}

static const char* const labels[] = {NULL, "a", "b"};
static const char* const codes[] = {"Fuzz", "Other", "Timeout"};
static const char* const names[] = {"x", "y"};

// ---------------------------------------------------------------------------
// Values

static void obj_cleanup(FutoInBinaryValue* v)
{
    long i = (uint8_t*)v->custom_data - objs;
    if (i < 0 || i >= nobjs) {
        fail("cleanup of an object that is not one", i);
        return;
    }
    if (objs[i] != 1) {
        fail(objs[i] == 2 ? "object cleaned up twice" : "object cleaned up before it was made", i);
    }
    objs[i] = 2;
    reenter();
}

static const FutoInType t_obj = {FTN_TYPE_CUSTOM_OBJECT, obj_cleanup};
static const FutoInType t_i64 = {FTN_TYPE_INT64, NULL};
static const FutoInType t_str = {FTN_TYPE_STRING, NULL};
static const FutoInType t_bytes = {FTN_TYPE_ARRAY | FTN_TYPE_UINT8, NULL};
static const FutoInType t_odd = {0x7B, NULL}; // no such type
static const uint8_t bytes[] = {1, 2, 3, 4};

// make_args fills a with up to four values the program chooses.
static void make_args(FutoInArgs* a)
{
    memset(a, 0, sizeof(*a));
    int n = next() % 5;
    for (int i = 0; i < n; i++) {
        FutoInBinaryValue* v = &a->args[i];
        switch (next() % 8) {
        case 0:
        case 1:
            v->type = &t_i64;
            v->i64 = (int64_t)next() - 100;
            break;
        case 2:
            v->type = &t_str;
            v->cstr = codes[next() % 3];
            break;
        case 3:
            v->type = &t_bytes;
            v->p = bytes;
            v->length = next() % 5;
            break;
        case 4:
        case 5:
            if (nobjs < FZ_OBJS) {
                v->type = &t_obj;
                objs[nobjs] = 1;
                v->custom_data = &objs[nobjs++];
            }
            break;
        case 6: // unusable: a NULL string of some length
            v->type = &t_str;
            v->length = 1 + next() % 3;
            break;
        case 7:
            v->type = &t_odd;
            break;
        }
    }
}

// check_args reads what a step or callback was passed.
static void check_args(const FutoInArgs* args)
{
    if (!args) {
        fail("step passed no FutoInArgs", 0);
        return;
    }
    for (int i = 0; i < 4; i++) {
        const FutoInBinaryValue* v = &args->args[i];
        if (v->type == &t_obj) {
            long k = (const uint8_t*)v->custom_data - objs;
            if (k < 0 || k >= nobjs || objs[k] != 1) {
                fail("step passed an object that is not live", k);
            }
        } else if (v->type && v->type->flags == FTN_TYPE_STRING && v->cstr) {
            (void)strlen(v->cstr);
        }
    }
}

// ---------------------------------------------------------------------------
// Callbacks

static void step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args);
static void handler(FutoInAsyncSteps* bsi, void* data, const char* code);
static int op(FutoInAsyncSteps* bsi, const FutoInArgs* args);

static FutoInAsyncSteps_error_callback some_handler(void)
{
    return next() & 1 ? handler : NULL;
}

static void keep(FutoInAsyncSteps* bsi)
{
    slots[next() % FZ_SLOTS] = bsi;
}

static void cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    if (next() % 4 == 0) {
        bsi->api->add(bsi, NULL, step, NULL); // forbidden: the step is being canceled
    }
    reenter();
}

static void stack_cleanup(void* value)
{
    uint32_t i;
    memcpy(&i, value, sizeof(i));
    if (i >= (uint32_t)nstacks) {
        fail("Stack memory overwritten: it names no allocation", i);
        return;
    }
    if (stacks[i] != 1) {
        fail("Stack cleanup ran twice", i);
    }
    stacks[i] = 2;
    const uint8_t* b = value;
    for (size_t k = sizeof(i); k < stack_size[i]; k++) {
        if (b[k] != (uint8_t)i) {
            fail("Stack memory overwritten", i);
            break;
        }
    }
    reenter();
}

static void* state_alloc(void* data)
{
    (void)data;
    state_allocs++;
    reenter();
    return malloc(8);
}

static void state_cleanup(void* data, void* value)
{
    (void)data;
    state_cleanups++;
    free(value);
    reenter();
}

// calls_away is how many of through's calls another thread may make:
// success, handle_error and the calls that only ask (isValid,
// is_same_thread) come first.
enum { calls_away = 3 };

// through calls a kept handle, stale or not, the way the program says,
// choosing among the first n of its calls.
static void through_n(unsigned n)
{
    FutoInAsyncSteps* b = slots[next() % FZ_SLOTS];
    if (!b) {
        return;
    }
    FutoInArgs a;
    switch (next() % n) {
    case 0:
        make_args(&a);
        b->api->success(b, &a);
        break;
    case 1:
        b->api->handle_error(b, codes[next() % 3], "through");
        break;
    case 2:
        (void)b->api->isValid(b);
        (void)b->api->is_same_thread(b);
        break;
    case 3:
        b->api->add(b, NULL, step, some_handler());
        break;
    case 4:
        b->api->setTimeout(b, next() % 20);
        break;
    case 5:
        b->api->cancel(b);
        break;
    case 6:
        (void)b->api->rootId(b);
        break;
    case 7:
        b->api->waitExternal(b);
        break;
    }
}

static void through(void)
{
    through_n(8);
}

static void deferred(void* data)
{
    (void)data;
    if (budget > 0) {
        budget--;
        through();
    }
}

static void loop_body(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    if (!live()) {
        bsi->api->breakLoop(bsi, NULL);
        return;
    }
    budget--;
    for (int n = next() % 3; n > 0 && live(); n--) {
        if (op(bsi, &(FutoInArgs){0})) {
            return;
        }
    }
}

static void repeat_body(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)i;
    loop_body(bsi, data);
}

static void unhandled(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    (void)code;
}

// op does what the program says next with bsi, the handle of a step (or
// loop body) passed args, and reports whether that ended the step.
static int op(FutoInAsyncSteps* bsi, const FutoInArgs* args)
{
    const FutoInAsyncStepsAPI* api = bsi->api;
    FutoInArgs a;
    switch (next() % 30) {
    case 0:
    case 1:
    case 26:
    case 27:
    case 28:
    case 29: // the commonest, so that flows grow
        api->add(bsi, NULL, step, some_handler());
        return 0;
    case 2:
        make_args(&a);
        api->success(bsi, &a);
        return 1;
    case 3:
        api->handle_error(bsi, codes[next() % 3], "fuzz");
        return 1;
    case 4:
        api->setTimeout(bsi, next() % 40);
        return 0;
    case 5:
        api->setCancel(bsi, NULL, cancel);
        return 0;
    case 6: {
        api->waitExternal(bsi);
        int k = next() % FZ_SLOTS;
        slots[k] = bsi;
        if (next() & 1) {
            api->sched_deferred(bsi, next() % 30, NULL, deferred);
        }
        return 0;
    }
    case 7: {
        size_t size = 4 + (next() % 16) * 8;
        void* p = nstacks < FZ_STACKS ? api->stack(bsi, size, stack_cleanup) : NULL;
        if (p) {
            uint32_t i = nstacks++;
            stacks[i] = 1;
            stack_size[i] = size;
            memcpy(p, &i, sizeof(i));
            memset((uint8_t*)p + sizeof(i), (uint8_t)i, size - sizeof(i));
        }
        return 0;
    }
    case 8:
        (void)api->stateVariable(bsi, NULL, names[next() % 2], state_alloc, state_cleanup);
        return 0;
    case 9:
        api->loop(bsi, NULL, loop_body, labels[next() % 3]);
        return 0;
    case 10:
        api->repeat(bsi, NULL, next() % 4, repeat_body, labels[next() % 3]);
        return 0;
    case 11:
        api->breakLoop(bsi, labels[next() % 3]);
        return 1;
    case 12:
        api->continueLoop(bsi, labels[next() % 3]);
        return 1;
    case 13: {
        FutoInAsyncSteps* p = api->parallel(bsi, NULL, some_handler());
        for (int n = next() % 4; n > 0 && p; n--) {
            p->api->add(p, NULL, step, some_handler());
        }
        return 0;
    }
    case 14:
        keep(bsi);
        return 0;
    case 15:
        through();
        return 0;
    case 16:
        api->cancel(bsi); // forbidden: not a root
        return 1;
    case 17:
        api->sched_immediate(bsi, NULL, deferred);
        return 0;
    case 18: {
        FutoInHandle h = api->sched_deferred(bsi, next() % 30, NULL, deferred);
        if (next() & 1) {
            api->sched_cancel(bsi, &h);
        }
        (void)api->sched_is_valid(bsi, &h);
        return 0;
    }
    case 19:
        if (nnews < FZ_NEWS) {
            FutoInAsyncSteps* r = api->newInstance(bsi);
            if (r) {
                news[nnews++] = r;
                r->api->add(r, NULL, step, some_handler());
                r->api->execute(r, NULL, next() & 1 ? unhandled : NULL);
                if (next() % 4 == 0) {
                    slots[next() % FZ_SLOTS] = r;
                }
            }
        }
        return 0;
    case 20:
        if (nnews > 0 && next() % 3 == 0) {
            FutoInAsyncSteps* r = news[--nnews];
            r->api->free(r);
        }
        return 0;
    case 21:
        if (fz_sync) {
            api->addSync(bsi, fz_sync, NULL, step, some_handler());
        }
        return 0;
    case 22: // forbidden: success twice
        make_args(&a);
        api->success(bsi, &a);
        make_args(&a);
        api->success(bsi, &a);
        return 1;
    case 23: // forbidden: success after adding a step
        api->add(bsi, NULL, step, NULL);
        make_args(&a);
        api->success(bsi, &a);
        return 1;
    case 24: { // the values received, passed on
        a = *args;
        api->success(bsi, &a);
        return 1;
    }
    case 25:
        (void)api->is_same_thread(bsi);
        (void)api->isValid(bsi);
        return 0;
    }
    return 0;
}

static void step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    check_args(args);
    if (budget <= 0) {
        return;
    }
    budget--;
    for (int n = 1 + next() % 4; n > 0 && live(); n--) {
        if (op(bsi, args)) {
            return;
        }
    }
}

static void handler(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    if (!code) {
        fail("error handler passed no code", 0);
    } else {
        (void)strlen(code);
    }
    if (!live()) {
        return;
    }
    budget--;
    FutoInArgs a;
    switch (next() % 6) {
    case 0:
        return; // the error goes on
    case 1:
        make_args(&a);
        bsi->api->success(bsi, &a);
        return;
    case 2:
        bsi->api->handle_error(bsi, codes[next() % 3], "handler");
        return;
    case 3:
        bsi->api->add(bsi, NULL, step, some_handler());
        return;
    case 4:
        keep(bsi);
        return;
    case 5:
        op(bsi, &(FutoInArgs){0});
        return;
    }
}

// ---------------------------------------------------------------------------
// The Go side's entry points

void ctest_fuzz_begin(const uint8_t* p, size_t n, FutoInSync* sync)
{
    prog = p;
    prog_len = n;
    pos = 0;
    budget = FZ_BUDGET;
    fz_sync = sync;
    memset(slots, 0, sizeof(slots));
    memset(news, 0, sizeof(news));
    nnews = 0;
    memset(objs, 0, sizeof(objs));
    memset(stacks, 0, sizeof(stacks));
    nobjs = nstacks = state_allocs = state_cleanups = 0;
    problem[0] = 0;
}

// ctest_fuzz_away calls, from a thread that is not the loop's, through a
// handle the program kept, if the program says so: success and
// handle_error may come from any thread.
void ctest_fuzz_away(void)
{
    if (live() && next() % 2 == 1) {
        through_n(calls_away);
    }
}

// ctest_fuzz_start adds the program's first step to root.
void ctest_fuzz_start(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, step, handler);
}

// ctest_fuzz_live reports whether the program goes on, for the Go steps,
// handlers and loop bodies FuzzFFI runs beside the C ones; spend takes the
// callback that asks from the budget.
int ctest_fuzz_live(int spend)
{
    if (!live()) {
        return 0;
    }
    if (spend) {
        budget--;
    }
    return 1;
}

// ctest_fuzz_next returns the program's next byte, 0 past its end.
unsigned ctest_fuzz_next(void)
{
    return next();
}

// ctest_fuzz_keep keeps bsi, the record of a Go step, for the program's
// calls through kept handles, if the program says so.
void ctest_fuzz_keep(FutoInAsyncSteps* bsi)
{
    keep(bsi);
}

// ctest_fuzz_finish frees the roots the program made and left.
void ctest_fuzz_finish(void)
{
    while (nnews > 0) {
        FutoInAsyncSteps* r = news[--nnews];
        r->api->free(r);
    }
    prog = NULL;
    prog_len = pos = 0;
}

// ctest_fuzz_pending returns how many custom objects stepvm holds.
int ctest_fuzz_pending(void)
{
    int n = 0;
    for (int i = 0; i < nobjs; i++) {
        n += objs[i] == 1;
    }
    return n;
}

// ctest_fuzz_problem describes the first problem of the run, after every
// cleanup must have run; "" when there is none.
const char* ctest_fuzz_problem(void)
{
    for (int i = 0; i < nobjs; i++) {
        if (objs[i] != 2) {
            fail("object never cleaned up", i);
        }
    }
    for (int i = 0; i < nstacks; i++) {
        if (stacks[i] != 2) {
            fail("Stack cleanup never ran", i);
        }
    }
    if (state_allocs != state_cleanups) {
        fail("state variables allocated and not cleaned up", state_allocs - state_cleanups);
    }
    return problem;
}
