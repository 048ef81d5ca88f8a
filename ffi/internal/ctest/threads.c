// Error handlers that try to wait, and stack memory in the threads of a
// flow: parallel branches, loop bodies and sync sections inside them, the
// error handlers of steps and of parallel steps.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctest.h"

static int counts[2]; // stack cleanups, cancel handlers of ctest_stack_branches

int ctest_threads_count(int which)
{
    return counts[which];
}

static void say_line(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    ctest_say((const char*)data);
}

// ---------------------------------------------------------------------------
// An error handler that calls setTimeout, setCancel or waitExternal.

static int hw_what, hw_through, hw_then;
static FutoInAsyncSteps* hw_kept; // the record the failing step's function had

static void hw_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
    ctest_say("handler's cancel ran");
}

static void hw_handler(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("handler %s", code);
    FutoInAsyncSteps* t = hw_through ? hw_kept : bsi;
    switch (hw_what) {
    case 1:
        t->api->setTimeout(t, 5);
        break;
    case 2:
        t->api->setCancel(t, NULL, hw_cancel);
        break;
    case 3:
        t->api->waitExternal(t);
        break;
    }
    ctest_say("handler went on");
    switch (hw_then) {
    case 1:
        bsi->api->add(bsi, "added step", say_line, NULL);
        break;
    case 2:
        bsi->api->success(bsi, NULL);
        break;
    }
}

static void hw_fail(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    hw_kept = bsi;
    bsi->api->handle_error(bsi, "E", NULL);
}

static void hw_parallel(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    hw_kept = bsi;
    FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, hw_handler);
    p->api->add(p, NULL, hw_fail, NULL);
}

// ctest_handler_wait adds to bsi a C step that fails with "E" (parallel:
// a C step whose parallel step's branch does), whose C error handler
// prints "handler <code>", calls what (1 setTimeout, 2 setCancel, 3
// waitExternal) through its own record or (through) the record of the
// failing step's function, prints "handler went on" and then returns
// (then 0), adds a step that prints "added step" (1) or succeeds (2).
void ctest_handler_wait(FutoInAsyncSteps* bsi, int what, int through, int then, int parallel)
{
    hw_what = what;
    hw_through = through;
    hw_then = then;
    if (parallel) {
        bsi->api->add(bsi, NULL, hw_parallel, NULL);
    } else {
        bsi->api->add(bsi, NULL, hw_fail, hw_handler);
    }
}

// ---------------------------------------------------------------------------
// Stack memory in every kind of frame of a parallel step's branches.

static void said(void* v)
{
    ctest_sayf("cleanup %s", (const char*)v);
}

// take takes two pieces of stack memory, "<line> 1" then "<line> 2", whose
// cleanups print them.
static void take(FutoInAsyncSteps* bsi, const char* line)
{
    for (int i = 1; i <= 2; i++) {
        char* m = (char*)bsi->api->stack(bsi, 32, said);
        if (m) {
            snprintf(m, 32, "%s %d", line, i);
        }
    }
}

static void st_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    ctest_sayf("cancel %s", (const char*)data);
}

static void a_section(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    take(bsi, "A section");
    bsi->api->setCancel(bsi, "A section", st_cancel);
}

static void a_body(FutoInAsyncSteps* bsi, void* data)
{
    take(bsi, "A iteration");
    bsi->api->addSync(bsi, (FutoInSync*)data, NULL, a_section, NULL);
}

static void branch_a(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    take(bsi, "A");
    bsi->api->loop(bsi, data, a_body, NULL);
}

static int st_mode;

static void b_wait(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    take(bsi, "B wait");
    if (st_mode == 0) {
        bsi->api->setTimeout(bsi, 10);
    } else {
        bsi->api->setCancel(bsi, "B wait", st_cancel);
    }
}

static void b_handler(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("B handler %s", code);
    take(bsi, "B handler");
}

static void branch_b(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    take(bsi, "B");
    bsi->api->add(bsi, NULL, b_wait, b_handler);
}

static void p_added(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    take(bsi, "P added");
    bsi->api->success(bsi, NULL);
}

static void p_handler(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("P handler %s", code);
    take(bsi, "P handler");
    bsi->api->add(bsi, NULL, p_added, NULL);
}

static void host(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    take(bsi, "host");
    FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, p_handler);
    p->api->add(p, data, branch_a, NULL);
    p->api->add(p, NULL, branch_b, NULL);
}

// ctest_stack_threads adds to bsi a C step "host" that runs a parallel
// step with a C error handler "P" and two branches. Branch A runs a loop
// whose body enters a section of sync, which waits with a cancel handler;
// branch B adds a step with a C error handler that times out after 10 ms
// (mode 0) or waits with a cancel handler (mode 1). The parallel step's
// handler adds a step that succeeds. Each of these functions and handlers
// takes two pieces of stack memory, whose cleanups print.
void ctest_stack_threads(FutoInAsyncSteps* bsi, FutoInSync* sync, int mode)
{
    st_mode = mode;
    bsi->api->add(bsi, sync, host, NULL);
}

// ---------------------------------------------------------------------------
// Many branches that hold stack memory and wait.

static FutoInAsyncSteps** waiting;
static int nwaiting;

static void counted(void* v)
{
    (void)v;
    counts[0]++;
}

static void counted_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
    counts[1]++;
}

static void sb_wait(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->stack(bsi, 24, counted);
    bsi->api->setCancel(bsi, NULL, counted_cancel);
    waiting[nwaiting++] = bsi;
}

static void sb_handler(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    (void)code;
    bsi->api->stack(bsi, 8, counted);
}

static void sb_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->stack(bsi, 40, counted);
    bsi->api->stack(bsi, 0, counted);
    bsi->api->add(bsi, NULL, sb_wait, sb_handler);
}

static void sb_host(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    int n = (int)(intptr_t)data;
    FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, NULL);
    for (int i = 0; i < n; i++) {
        p->api->add(p, NULL, sb_branch, NULL);
    }
}

// ctest_stack_branches adds to bsi a C step that runs a parallel step of n
// branches, each of which takes two pieces of stack memory and adds a step
// with an error handler that takes one more and waits with a cancel
// handler; ctest_threads_count counts the stack cleanups (0) and the
// cancel handlers that ran (1).
void ctest_stack_branches(FutoInAsyncSteps* bsi, int n)
{
    counts[0] = counts[1] = 0;
    free(waiting);
    waiting = calloc((size_t)n, sizeof(*waiting));
    nwaiting = 0;
    bsi->api->add(bsi, (void*)(intptr_t)n, sb_host, NULL);
}

// ctest_stack_branches_end completes the waiting steps of
// ctest_stack_branches, last first: with success, or (fail) with
// handle_error, which their handlers let through.
void ctest_stack_branches_end(int fail)
{
    for (int i = nwaiting - 1; i >= 0; i--) {
        FutoInAsyncSteps* w = waiting[i];
        if (fail) {
            w->api->handle_error(w, "Ended", NULL);
        } else {
            w->api->success(w, NULL);
        }
    }
    nwaiting = 0;
}

// ---------------------------------------------------------------------------
// A branch's stack cleanup that ends its root while another branch waits.

static FutoInAsyncSteps* er_root; // made with newInstance
static int er_what;

static void ending(void* v)
{
    (void)v;
    counts[0]++;
    if (er_what) {
        er_root->api->free(er_root);
    } else {
        er_root->api->cancel(er_root);
    }
}

static void er_first(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    bsi->api->stack(bsi, 16, counted);
    bsi->api->stack(bsi, 16, ending);
    bsi->api->stack(bsi, 16, counted);
    if (data) {
        bsi->api->handle_error(bsi, "Fail", NULL);
    }
}

static void er_second(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->stack(bsi, 16, counted);
    bsi->api->setCancel(bsi, NULL, counted_cancel);
}

static void er_handler(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    ctest_sayf("parallel handler %s", code);
    bsi->api->stack(bsi, 16, counted);
}

static void er_host(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    bsi->api->stack(bsi, 16, counted);
    FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, er_handler);
    p->api->add(p, NULL, er_second, NULL);
    p->api->add(p, data, er_first, NULL);
}

// ctest_stack_ends_root makes a root with newInstance through host whose C
// step runs a parallel step with a C error handler: its first branch waits
// with a cancel handler, its second takes three pieces of stack memory,
// the middle one's cleanup canceling (what 0) or freeing (1) the root, and
// then succeeds or (fail) fails. Every function and handler takes stack
// memory; ctest_threads_count counts the cleanups (0) and the cancel
// handlers (1) that ran. ctest_stack_ends_root_free frees the root if it
// is valid.
void ctest_stack_ends_root(FutoInAsyncSteps* host, int what, int fail)
{
    counts[0] = counts[1] = 0;
    er_what = what;
    er_root = host->api->newInstance(host);
    er_root->api->add(er_root, (void*)(intptr_t)fail, er_host, NULL);
    er_root->api->execute(er_root, NULL, NULL);
}

void ctest_stack_ends_root_free(void)
{
    if (er_root->api->isValid(er_root)) {
        er_root->api->free(er_root);
    }
}
