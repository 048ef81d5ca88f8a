// Whole features driven from C through the function table, as a C library
// would use them.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctest.h"

// pass_args succeeds with the FutoInArgs it received, as they are.
static void pass_args(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    bsi->api->success(bsi, (FutoInArgs*)args);
}

// ---------------------------------------------------------------------------
// What a call was lent, read after the call ended its step. One branch of
// a parallel step waits; the other's steps end, then take as much of the
// root's memory through the waiting step as they were lent, which gets
// them the memory their step's end freed, if it freed what they were lent.

// reuse takes n bytes of the root's memory, as the lending did (a stack
// allocation has a 16-byte header of its own), and overwrites them.
static void reuse(size_t n)
{
    FutoInAsyncSteps* w = ctest_waiting();
    memset(w->api->stack(w, n - 16, NULL), 'R', n - 16);
}

static void release_waiter(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    (void)args;
    ctest_complete(ctest_waiting(), "");
}

static void emit_long(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    static char s[101];
    (void)data;
    (void)args;
    memset(s, 'x', 100);
    ctest_complete(bsi, s);
}

// after_success succeeds, then reads the string of 100 bytes it received.
static void after_success(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    const FutoInBinaryValue* v = &args->arg0;
    bsi->api->success(bsi, NULL);
    reuse(sizeof(FutoInArgs) + 101);
    if (!v->type || v->type->flags != FTN_TYPE_STRING) {
        ctest_sayf("after success: type %p", (const void*)v->type);
        return;
    }
    ctest_sayf("after success: %u %.*s", v->length, (int)v->length, v->cstr);
}

static void values_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->add(bsi, NULL, emit_long, NULL);
    bsi->api->add(bsi, NULL, after_success, NULL);
    bsi->api->add(bsi, NULL, release_waiter, NULL);
}

static void fail_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    bsi->api->handle_error(bsi, (const char*)data, NULL);
}

// code_after_success recovers, then reads the code it received.
static void code_after_success(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    bsi->api->success(bsi, NULL);
    reuse(strlen(code) + 1);
    ctest_sayf("code after success: %s", code);
}

static void error_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->add(bsi, "CodeOfAnErrorLongerThanAFewBytes", fail_step, code_after_success);
    bsi->api->add(bsi, NULL, release_waiter, NULL);
}

static void lent_after_end(FutoInAsyncSteps* root, FutoInAsyncSteps_execute_callback branch)
{
    FutoInAsyncSteps* p = root->api->parallel(root, NULL, NULL);
    ctest_add_wait(p);
    p->api->add(p, NULL, branch, NULL);
}

// ---------------------------------------------------------------------------
// Stack memory in loop iterations, handlers and parallel branches, loop
// control from nested levels and handlers, and calls back into the table
// from cancel handlers and stack cleanups. Each callback prints.

static FutoInAsyncSteps* acc; // the parallel accessor of scenarios 6 and 7
static int ncalls;            // iterations of scenario 5

static void say_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    ctest_say((const char*)data);
}

static void stack_said(void* v)
{
    ctest_sayf("cleanup %s", (const char*)v);
}

// stack_say takes stack memory holding the line its cleanup prints.
static void stack_say(FutoInAsyncSteps* bsi, const char* line)
{
    char* m = (char*)bsi->api->stack(bsi, 32, stack_said);
    if (m) {
        snprintf(m, 32, "%s", line);
    }
}

static void control_outer(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    if (data) {
        bsi->api->breakLoop(bsi, "outer");
    } else {
        bsi->api->continueLoop(bsi, "outer");
    }
}

static void inner_body(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    char line[32];
    int outer = (int)(intptr_t)data;
    snprintf(line, sizeof(line), "inner %d.%d", outer, (int)i);
    stack_say(bsi, line);
    if (i == 1) { // from a sub-step of the inner body
        bsi->api->add(bsi, (void*)(intptr_t)(outer == 2), control_outer, NULL);
    }
}

static void outer_body(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)data;
    char line[32];
    snprintf(line, sizeof(line), "outer %d", (int)i);
    stack_say(bsi, line);
    bsi->api->repeat(bsi, (void*)(intptr_t)i, 3, inner_body, "inner");
}

// handler_control continues the loop labelled "outer" twice, then breaks it.
static void handler_control(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("handler %s", code);
    stack_say(bsi, "handler");
    if (ncalls < 3) {
        bsi->api->continueLoop(bsi, "outer");
    } else {
        bsi->api->breakLoop(bsi, "outer");
    }
}

static void failing_body(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    char line[32];
    snprintf(line, sizeof(line), "iteration %d", ncalls++);
    stack_say(bsi, line);
    bsi->api->add(bsi, "Fail", fail_step, handler_control);
}

static void cancel_a(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    ctest_say("cancel A");
    if (data) { // a branch added while the parallel step unwinds
        acc->api->add(acc, "late branch", say_step, NULL);
    }
}

static void branch_a(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    stack_say(bsi, "A");
    bsi->api->setCancel(bsi, data, cancel_a);
}

static void add_late(void* v)
{
    (void)v;
    ctest_say("cleanup B");
    acc->api->add(acc, "late branch", say_step, NULL);
}

static void branch_b(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    if (data) {
        bsi->api->stack(bsi, 0, add_late);
    } else {
        stack_say(bsi, "B");
    }
    bsi->api->handle_error(bsi, "Boom", NULL);
}

static void parallel_handler(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("parallel handler %s", code);
    bsi->api->breakLoop(bsi, NULL);
}

// parallel_body runs a parallel step whose branch B fails while A waits;
// in scenario 6 A's cancel handler, in 7 B's stack cleanup adds a branch
// through the accessor.
static void parallel_body(FutoInAsyncSteps* bsi, void* data)
{
    int which = (int)(intptr_t)data;
    acc = bsi->api->parallel(bsi, NULL, parallel_handler);
    acc->api->add(acc, (void*)(intptr_t)(which == 6), branch_a, NULL);
    acc->api->add(acc, (void*)(intptr_t)(which == 7), branch_b, NULL);
}

void ctest_flow(FutoInAsyncSteps* root, int which)
{
    switch (which) {
    case 1:
        root->api->add(root, NULL, pass_args, NULL);
        break;
    case 2:
        lent_after_end(root, values_branch);
        break;
    case 3:
        lent_after_end(root, error_branch);
        break;
    case 4:
        root->api->repeat(root, NULL, 5, outer_body, "outer");
        break;
    case 5:
        ncalls = 0;
        root->api->loop(root, NULL, failing_body, "outer");
        break;
    case 6:
    case 7:
        root->api->loop(root, (void*)(intptr_t)which, parallel_body, NULL);
        break;

    }
}

// ---------------------------------------------------------------------------
// A state variable whose allocate function frees, or cancels, its root.

static FutoInAsyncSteps* owned; // a root made with newInstance
static int allocs, cleanups;

int ctest_flow_count(int which)
{
    return which ? cleanups : allocs;
}

static void* alloc_ending(void* data)
{
    allocs++;
    switch ((int)(intptr_t)data) {
    case 0:
        owned->api->cancel(owned);
        break;
    case 1:
        owned->api->free(owned);
        break;
    case 2:
        owned->api->handle_error(owned, "Nope", NULL);
        break;
    }
    return calloc(1, sizeof(int));
}

static void cleanup_counted(void* data, void* value)
{
    (void)data;
    cleanups++;
    free(value);
}

static void state_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    bsi->api->stateVariable(bsi, data, "ending", alloc_ending, cleanup_counted);
}

// ctest_flow_ending makes a root with newInstance through host whose step
// makes a state variable whose allocate cancels (mode 0), frees (1) or
// fails (2, a misuse: through the root) the root, and executes it.
void ctest_flow_ending(FutoInAsyncSteps* host, int mode)
{
    allocs = cleanups = 0;
    owned = host->api->newInstance(host);
    owned->api->add(owned, (void*)(intptr_t)mode, state_step, NULL);
    owned->api->execute(owned, NULL, NULL);
}

void ctest_flow_free(void)
{
    if (owned->api->isValid(owned)) {
        owned->api->free(owned);
    }
}
