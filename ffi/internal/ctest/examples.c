// The FTN12 examples, written in C against the binary interface. Each
// prints the same trace as its Go twin in the tests of package ffi.

#include <stdlib.h>
#include <string.h>

#include "ctest.h"

static void say_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    ctest_say((const char*)data);
}

void ctest_add_say(FutoInAsyncSteps* bsi, const char* line)
{
    bsi->api->add(bsi, (void*)line, say_step, NULL);
}

static void success_str(FutoInAsyncSteps* bsi, const char* s)
{
    static const FutoInType str_type = {FTN_TYPE_STRING, NULL};
    FutoInArgs args;
    memset(&args, 0, sizeof(args));
    args.arg0.type = &str_type;
    args.arg0.cstr = s;
    args.arg0.length = (uint32_t)strlen(s);
    bsi->api->success(bsi, &args);
}

// ---------------------------------------------------------------------------
// 1.1 Levels

static void l1_add1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ctest_say("Level 1 add #1");
    ctest_add_say(bsi, "Level 2 add #1");
    FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, NULL);
    ctest_add_say(p, "Level 2 parallel #2");
    ctest_add_say(bsi, "Level 2 add #3");
}

static void l0_add1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ctest_say("Level 0 add #1");
    bsi->api->add(bsi, NULL, l1_add1, NULL);
    FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, NULL);
    ctest_add_say(p, "Level 1 parallel #2");
    ctest_add_say(bsi, "Level 1 add #3");
}

void ctest_levels(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, l0_add1, NULL);
    FutoInAsyncSteps* p = root->api->parallel(root, NULL, NULL);
    ctest_add_say(p, "Level 0 parallel #2");
    ctest_add_say(root, "Level 0 add #3");
}

// ctest_mixed_level1 is Level 1 add #1 of 1.1, for a flow whose other
// steps are Go.
void ctest_mixed_level1(FutoInAsyncSteps* bsi)
{
    bsi->api->add(bsi, NULL, l1_add1, NULL);
}

// ---------------------------------------------------------------------------
// 1.2 Error handling

static void eh_l1_func(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ctest_say("Level 1 func");
    bsi->api->handle_error(bsi, "myerror", NULL);
}

static void eh_l1_onerror(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("Level 1 onerror: %s", code);
    bsi->api->handle_error(bsi, "newerror", NULL);
}

static void eh_l0_func(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ctest_say("Level 0 func");
    bsi->api->add(bsi, NULL, eh_l1_func, eh_l1_onerror);
}

static void eh_l0_onerror(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("Level 0 onerror: %s", code);
    success_str(bsi, "Prm");
}

static void eh_l0_func2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    ctest_sayf("Level 0 func2: %s", args->arg0.cstr);
    bsi->api->success(bsi, NULL);
}

void ctest_error_handling(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, eh_l0_func, eh_l0_onerror);
    root->api->add(root, NULL, eh_l0_func2, NULL);
}

// ---------------------------------------------------------------------------
// 1.2.1 Steps in error handler

static void sh_l2_func(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ctest_say("Level 2 func");
    bsi->api->handle_error(bsi, "second", NULL);
}

static void sh_l2_onerror(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    ctest_sayf("Level 2 onerror: %s", code);
}

static void sh_l1_func(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ctest_say("Level 1 func");
    bsi->api->handle_error(bsi, "first", NULL);
}

static void sh_l1_onerror(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("Level 1 onerror: %s", code);
    bsi->api->add(bsi, NULL, sh_l2_func, sh_l2_onerror);
}

static void sh_l0_func(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ctest_say("Level 0 func");
    bsi->api->add(bsi, NULL, sh_l1_func, sh_l1_onerror);
}

static void sh_l0_onerror(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    ctest_sayf("Level 0 onerror: %s", code);
}

void ctest_steps_in_error_handler(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, sh_l0_func, sh_l0_onerror);
}

// ---------------------------------------------------------------------------
// Parallel steps and state (README "Simple steps", from its parallel part;
// FTN12 3.3)

static void* alloc_str(void* data)
{
    (void)data;
    return calloc(1, 64);
}

static void free_str(void* data, void* value)
{
    (void)data;
    free(value);
}

static char* state_str(FutoInAsyncSteps* bsi, const char* name)
{
    return (char*)bsi->api->stateVariable(bsi, NULL, name, alloc_str, free_str);
}

static void par_sub(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    int n = *(const int*)data;
    ctest_sayf("Parallel Step %d.1", n);
    char* out = state_str(bsi, n == 1 ? "p1" : "p2");
    strcpy(out, state_str(bsi, n == 1 ? "p1arg" : "p2arg"));
    strcat(out, n == 1 ? "1" : "2");
    bsi->api->success(bsi, NULL);
}

static void par_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    ctest_sayf("Parallel Step %d", *(const int*)data);
    bsi->api->add(bsi, data, par_sub, NULL);
}

static void par_start(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    static const int one = 1, two = 2;
    (void)data;
    (void)args;
    strcpy(state_str(bsi, "p1arg"), "abc");
    strcpy(state_str(bsi, "p2arg"), "xyz");
    FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, NULL);
    p->api->add(p, (void*)&one, par_branch, NULL);
    p->api->add(p, (void*)&two, par_branch, NULL);
}

static void par_result(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ctest_sayf("Parallel 1 result: %s", state_str(bsi, "p1"));
    ctest_sayf("Parallel 2 result: %s", state_str(bsi, "p2"));
}

void ctest_parallel(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, par_start, NULL);
    root->api->add(root, NULL, par_result, NULL);
}

// ---------------------------------------------------------------------------
// Parallel execution abort (FTN12 1.4): an error in one branch cancels the
// others and reaches the parallel step's handler.

static void abort_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
    ctest_say("branch 1 canceled");
}

static void abort_b1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ctest_say("branch 1 waits");
    bsi->api->setCancel(bsi, NULL, abort_cancel);
}

static void abort_b2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ctest_say("branch 2 fails");
    bsi->api->handle_error(bsi, "fail", "branch 2");
}

static void abort_onerror(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("parallel onerror: %s", code);
    bsi->api->success(bsi, NULL);
}

static void abort_start(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, abort_onerror);
    p->api->add(p, NULL, abort_b1, NULL);
    p->api->add(p, NULL, abort_b2, NULL);
    ctest_add_say(bsi, "after parallel");
}

void ctest_parallel_abort(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, abort_start, NULL);
}

// ---------------------------------------------------------------------------
// Loops (FTN12 1.8): repeat, loop with continue and break, a labelled outer
// loop left from a sub-step of an inner one.

static int loop_count, outer_count, inner_count;

static void rep_body(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)bsi;
    (void)data;
    ctest_sayf("> Repeat: %zu", i);
}

static void loop_body(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    loop_count++;
    if (loop_count == 2) {
        bsi->api->continueLoop(bsi, NULL);
        return; // C has no exceptions: the function must return itself

    }
    ctest_sayf("> Loop: %d", loop_count);
    if (loop_count == 4) {
        bsi->api->breakLoop(bsi, NULL);
    }
}

static void inner_sub(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    if (inner_count == 2) {
        bsi->api->continueLoop(bsi, "OUTER");
        return;
    }
    if (outer_count == 3) {
        bsi->api->breakLoop(bsi, "OUTER");
        return;
    }
    bsi->api->success(bsi, NULL);
}

static void inner_body(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    inner_count++;
    ctest_sayf("> Inner: %d.%d", outer_count, inner_count);
    bsi->api->add(bsi, NULL, inner_sub, NULL);
}

static void outer_body(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    outer_count++;
    inner_count = 0;
    bsi->api->loop(bsi, NULL, inner_body, NULL);
    ctest_add_say(bsi, "never printed either");
}

static void loops_start(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->repeat(bsi, NULL, 3, rep_body, NULL);
    bsi->api->loop(bsi, NULL, loop_body, NULL);
    bsi->api->loop(bsi, NULL, outer_body, "OUTER");
    ctest_add_say(bsi, "> Done");
}

void ctest_loops(FutoInAsyncSteps* root)
{
    loop_count = outer_count = inner_count = 0;
    root->api->add(root, NULL, loops_start, NULL);
}

// ---------------------------------------------------------------------------
// External event wait and timeouts (README "External event wait")

static void ext_fire(void* data)
{
    success_str((FutoInAsyncSteps*)data, "async success()");
}

static void ext_step1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->sched_immediate(bsi, bsi, ext_fire);
    bsi->api->setTimeout(bsi, 10);
}

static void ext_dummy_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
}

static void ext_step2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    ctest_say(args->arg0.cstr);
    bsi->api->setCancel(bsi, NULL, ext_dummy_cancel);
    bsi->api->setTimeout(bsi, 1000);
}

static void ext_onerror(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    ctest_sayf("%s: ", code);
}

void ctest_external_wait(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, ext_step1, NULL);
    root->api->add(root, NULL, ext_step2, ext_onerror);
}

// ---------------------------------------------------------------------------
// Synchronization (FTN12 3.6): a section that waits 10 ms, entered by two
// flows.

static const char* const sync_names[] = {"A", "B", "C"};

static void sync_done(void* data)
{
    FutoInAsyncSteps* bsi = (FutoInAsyncSteps*)data;
    bsi->api->success(bsi, NULL);
}

static void sync_wait(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->waitExternal(bsi);
    bsi->api->sched_deferred(bsi, 10, bsi, sync_done);
}

static void sync_leave(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    ctest_sayf("%s leave", (const char*)data);
}

static void sync_section(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    ctest_sayf("%s enter", (const char*)data);
    bsi->api->add(bsi, data, sync_wait, NULL);
    bsi->api->add(bsi, data, sync_leave, NULL);
}

void ctest_sync_flow(FutoInAsyncSteps* root, FutoInSync* sync, int name)
{
    root->api->addSync(root, sync, (void*)sync_names[name], sync_section, NULL);
}

// A mutex for one flow at a time, implemented in C as a foreign library
// would: flows are told apart by rootId, waiters complete through the
// FutoInAsyncSteps lock was called with.
typedef struct
{
    FutoInSync base;
    int locked;
    ptrdiff_t owner;
    int depth;
    FutoInAsyncSteps* queue[16];
    ptrdiff_t queue_id[16];
    int queued;
} c_mutex;

static void cm_lock(FutoInAsyncSteps* bsi, FutoInSync* sync)
{
    c_mutex* m = (c_mutex*)sync;
    ptrdiff_t id = bsi->api->rootId(bsi);
    if (!m->locked) {
        m->locked = 1;
        m->owner = id;
        m->depth = 1;
        return;
    }
    if (m->owner == id) {
        m->depth++;
        return;
    }
    if (m->queued == 16) {
        bsi->api->handle_error(bsi, "DefenseRejected", "Mutex queue limit");
        return;
    }
    m->queue[m->queued] = bsi;
    m->queue_id[m->queued++] = id;
    bsi->api->waitExternal(bsi);
}

static void cm_unlock(FutoInAsyncSteps* bsi, FutoInSync* sync)
{
    c_mutex* m = (c_mutex*)sync;
    ptrdiff_t id = bsi->api->rootId(bsi);
    for (int i = 0; i < m->queued; i++) {
        if (m->queue_id[i] == id) { // left while waiting
            memmove(&m->queue[i], &m->queue[i + 1], (size_t)(m->queued - i - 1) * sizeof(m->queue[0]));
            memmove(&m->queue_id[i], &m->queue_id[i + 1], (size_t)(m->queued - i - 1) * sizeof(m->queue_id[0]));
            m->queued--;
            return;
        }
    }
    if (!m->locked || m->owner != id) {
        return;
    }
    if (--m->depth > 0) {
        return;
    }
    if (m->queued == 0) {
        m->locked = 0;
        return;
    }
    FutoInAsyncSteps* next = m->queue[0];
    m->owner = m->queue_id[0];
    m->depth = 1;
    m->queued--;
    memmove(&m->queue[0], &m->queue[1], (size_t)m->queued * sizeof(m->queue[0]));
    memmove(&m->queue_id[0], &m->queue_id[1], (size_t)m->queued * sizeof(m->queue_id[0]));
    next->api->success(next, NULL);
}

static const FutoInSyncAPI c_mutex_api = {{{.lock = cm_lock, .unlock = cm_unlock}}};
static c_mutex the_c_mutex = {.base = {&c_mutex_api}};

FutoInSync* ctest_c_mutex(void)
{
    the_c_mutex.locked = 0;
    the_c_mutex.owner = 0;
    the_c_mutex.depth = 0;
    the_c_mutex.queued = 0;
    return &the_c_mutex.base;
}

// ---------------------------------------------------------------------------
// Single C steps for flows mixing Go and C.

static void break_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    ctest_say("C breaks");
    bsi->api->breakLoop(bsi, (const char*)data);
}

// ctest_add_break adds a C step that leaves the loop labelled label (NULL:
// the innermost).
void ctest_add_break(FutoInAsyncSteps* bsi, const char* label)
{
    bsi->api->add(bsi, (void*)label, break_step, NULL);
}

static void fail_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    ctest_sayf("C fails with %s", (const char*)data);
    bsi->api->handle_error(bsi, (const char*)data, "from C");
}

static void recover_handler(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("C handles %s", code);
    success_str(bsi, "recovered in C");
}

// ctest_add_fail adds a C step that fails with code; with recover, its C
// error handler settles the error with a string.
void ctest_add_fail(FutoInAsyncSteps* bsi, const char* code, int recover)
{
    bsi->api->add(bsi, (void*)code, fail_step, recover ? recover_handler : NULL);
}

int ctest_is_valid(FutoInAsyncSteps* bsi)
{
    return bsi->api->isValid(bsi);
}

static const FutoInAsyncStepsAPI foreign_api = {{{.add = NULL}}};
static FutoInAsyncSteps foreign = {&foreign_api};

// ctest_foreign returns a FutoInAsyncSteps of another implementation.
FutoInAsyncSteps* ctest_foreign(void)
{
    return &foreign;
}

static void unhandled(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    ctest_sayf("unhandled: %s", code);
}

// ctest_execute_with_handler executes root with a handler of unhandled
// errors.
void ctest_execute_with_handler(FutoInAsyncSteps* root)
{
    root->api->execute(root, NULL, unhandled);
}
