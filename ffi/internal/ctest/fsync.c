// C sections under a FutoInSync, for the tests of addSync with stepvm's
// primitives: the section prints the values it got, then ends as its mode
// says (success, handle_error, breakLoop, continueLoop, a timeout, a wait
// with a cancel handler, a parallel step, a call of the FutoInSync's own
// lock or unlock, a nested addSync); its error handler prints the code and
// may recover or sync again.

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ctest.h"

typedef struct
{
    FutoInSync* sync;
    int mode, eh;
    const char* name;
} fs_data;

static const FutoInType fs_str = {FTN_TYPE_STRING, 0};
static fs_data fs_pool[64];
static int fs_next;
static FutoInAsyncSteps* fs_kept;
static int fs_cancels;

static fs_data* fs_new(FutoInSync* sync, int mode, int eh, const char* name)
{
    fs_data* d = &fs_pool[fs_next++ % 64];
    d->sync = sync;
    d->mode = mode;
    d->eh = eh;
    d->name = name;
    return d;
}

static void fs_say_args(const char* name, const FutoInArgs* args)
{
    char line[256];
    int n = snprintf(line, sizeof(line), "%s got", name);
    for (int i = 0; i < 4; i++) {
        const FutoInBinaryValue* v = &args->args[i];
        if (!v->type) {
            break;
        }
        switch (v->type->flags) {
        case FTN_TYPE_INT64:
            n += snprintf(line + n, sizeof(line) - n, " %lld", (long long)v->i64);
            break;
        case FTN_TYPE_STRING:
            n += snprintf(line + n, sizeof(line) - n, " %s", v->cstr);
            break;
        default:
            n += snprintf(line + n, sizeof(line) - n, " type%d", v->type->flags);
        }
    }
    ctest_say(line);
}

static void fs_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    fs_cancels++;
    ctest_sayf("%s canceled", ((fs_data*)data)->name);
}

static void fs_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    ctest_say((const char*)data);
}

static void fs_section(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args);
static void fs_handler(FutoInAsyncSteps* bsi, void* data, const char* code);

static void fs_section(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    fs_data* d = (fs_data*)data;
    fs_say_args(d->name, args);
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    switch (d->mode) {
    case CTEST_FS_SUCCESS:
        out.arg0 = args->arg0;
        out.arg1 = args->arg1;
        out.arg2 = args->arg2;
        out.arg3 = args->arg3;
        bsi->api->success(bsi, &out);
        return;
    case CTEST_FS_ERROR:
        bsi->api->handle_error(bsi, "Boom", "section fails");
        return;
    case CTEST_FS_BREAK:
        bsi->api->breakLoop(bsi, NULL);
        return;
    case CTEST_FS_CONTINUE:
        bsi->api->continueLoop(bsi, NULL);
        return;
    case CTEST_FS_TIMEOUT:
        fs_kept = bsi;
        bsi->api->setTimeout(bsi, 10);
        return;
    case CTEST_FS_WAIT:
        fs_kept = bsi;
        bsi->api->setCancel(bsi, d, fs_cancel);
        return;
    case CTEST_FS_PARALLEL: {
        FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, NULL);
        p->api->add(p, (void*)"branch 1", fs_branch, NULL);
        p->api->add(p, (void*)"branch 2", fs_branch, NULL);
        return;
    }
    case CTEST_FS_LOCK:
        d->sync->api->lock(bsi, d->sync);
        ctest_sayf("%s lock returned", d->name);
        return;
    case CTEST_FS_UNLOCK:
        d->sync->api->unlock(bsi, d->sync);
        ctest_sayf("%s unlock returned", d->name);
        return;
    case CTEST_FS_NESTED:
        bsi->api->addSync(bsi, d->sync, fs_new(d->sync, CTEST_FS_SUCCESS, 0, "nested"), fs_section, NULL);
        return;
    }
}

static void fs_handler(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    fs_data* d = (fs_data*)data;
    ctest_sayf("%s handler %s", d->name, code);
    switch (d->eh) {
    case CTEST_FS_EH_RECOVER: {
        FutoInArgs out;
        memset(&out, 0, sizeof(out));
        out.arg0.type = &fs_str;
        out.arg0.cstr = "recovered";
        bsi->api->success(bsi, &out);
        return;
    }
    case CTEST_FS_EH_SYNC:
        bsi->api->addSync(bsi, d->sync, fs_new(d->sync, CTEST_FS_SUCCESS, 0, "in handler"), fs_section, NULL);
        return;
    }
}

void ctest_fs_add(FutoInAsyncSteps* bsi, FutoInSync* sync, int mode, int eh, const char* name)
{
    bsi->api->addSync(bsi, sync, fs_new(sync, mode, eh, name), fs_section, eh ? fs_handler : NULL);
}

// ctest_fs_add_call adds a C step that calls sync's own lock (unlock: its
// unlock) through the FutoInAsyncSteps what names: 0 its own, 1 NULL, 2
// the one kept last (fs_kept).
static void fs_call_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    fs_data* d = (fs_data*)data;
    FutoInAsyncSteps* through = d->eh == 0 ? bsi : d->eh == 1 ? NULL : fs_kept;
    if (d->mode) {
        d->sync->api->unlock(through, d->sync);
    } else {
        d->sync->api->lock(through, d->sync);
    }
    ctest_sayf("%s returned", d->name);
}

void ctest_fs_add_call(FutoInAsyncSteps* bsi, FutoInSync* sync, int unlock, int what, const char* name)
{
    bsi->api->add(bsi, fs_new(sync, unlock, what, name), fs_call_step, NULL);
}

void ctest_fs_complete_kept(void)
{
    if (fs_kept) {
        fs_kept->api->success(fs_kept, NULL);
    }
}

int ctest_fs_cancels(void)
{
    return fs_cancels;
}

void ctest_fs_reset(void)
{
    fs_kept = NULL;
    fs_cancels = 0;
}

// ctest_fs_half_sync returns a FutoInSync whose unlock is NULL.
static void fs_half_lock(FutoInAsyncSteps* bsi, FutoInSync* sync)
{
    (void)bsi;
    (void)sync;
    ctest_say("half lock");
}

static const FutoInSyncAPI fs_half_api = {{{.lock = fs_half_lock}}};
static FutoInSync fs_half = {&fs_half_api};

FutoInSync* ctest_fs_half_sync(void)
{
    return &fs_half;
}

// ctest_fs_call calls sync's lock (unlock: its unlock) with bsi, from
// whatever runs it.
void ctest_fs_call(FutoInAsyncSteps* bsi, FutoInSync* sync, int unlock)
{
    if (unlock) {
        sync->api->unlock(bsi, sync);
    } else {
        sync->api->lock(bsi, sync);
    }
}

// ctest_fs_add_step adds a C step that adds a section of sync (FsAdd's,
// mode success) from its own function.
static void fs_adder(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    fs_data* d = (fs_data*)data;
    ctest_fs_add(bsi, d->sync, CTEST_FS_SUCCESS, CTEST_FS_EH_NONE, d->name);
}

void ctest_fs_add_step(FutoInAsyncSteps* bsi, FutoInSync* sync, const char* name)
{
    bsi->api->add(bsi, fs_new(sync, 0, 0, name), fs_adder, NULL);
}
