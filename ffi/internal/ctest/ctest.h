/* C side of the tests of package ffi: FTN12 examples and misuse written
 * against futoin/binaryapi.h only, as any C library would be. */
#ifndef STEPVM_CTEST_H
#define STEPVM_CTEST_H

#include "futoin/binaryapi.h"

/* trace.c: the lines the examples print. */
void ctest_say(const char* s);
void ctest_sayf(const char* fmt, ...);
const char* ctest_trace(void);
void ctest_trace_reset(void);

/* layout.c */
const char* ctest_layout(void);
int ctest_table_complete(FutoInAsyncSteps* bsi);

/* examples.c */
void ctest_levels(FutoInAsyncSteps* root);
void ctest_error_handling(FutoInAsyncSteps* root);
void ctest_steps_in_error_handler(FutoInAsyncSteps* root);
void ctest_parallel(FutoInAsyncSteps* root);
void ctest_parallel_abort(FutoInAsyncSteps* root);
void ctest_loops(FutoInAsyncSteps* root);
void ctest_external_wait(FutoInAsyncSteps* root);
void ctest_sync_flow(FutoInAsyncSteps* root, FutoInSync* sync, int name);
FutoInSync* ctest_c_mutex(void);
void ctest_mixed_level1(FutoInAsyncSteps* bsi);
void ctest_add_say(FutoInAsyncSteps* bsi, const char* line);
void ctest_add_break(FutoInAsyncSteps* bsi, const char* label);
void ctest_add_fail(FutoInAsyncSteps* bsi, const char* code, int recover);
int ctest_is_valid(FutoInAsyncSteps* bsi);
FutoInAsyncSteps* ctest_foreign(void);
void ctest_execute_with_handler(FutoInAsyncSteps* root);

/* oddsync.c */
enum
{
    CTEST_ODD_LOCK_SUCCESS = 1,
    CTEST_ODD_LOCK_WAIT_SUCCESS,
    CTEST_ODD_LOCK_REFUSE,
    CTEST_ODD_LOCK_SUCCESS_TWICE,
    CTEST_ODD_LOCK_ADD,
    CTEST_ODD_LOCK_QUEUE,
    CTEST_ODD_LOCK_MUTEX,
};
enum
{
    CTEST_ODD_UNLOCK_COUNT = 0,
    CTEST_ODD_UNLOCK_FAIL,
    CTEST_ODD_UNLOCK_HANDOVER,
};
FutoInSync* ctest_odd_sync(int lock_mode, int unlock_mode);
void ctest_odd_counts(int* locks, int* unlocks, int* queued);
void ctest_odd_grant(int again);

/* misuse.c */
void ctest_misuse(FutoInAsyncSteps* root, int scenario, int gap);
void ctest_misuse_outside(FutoInAsyncSteps* root, int scenario);

/* values.c */
void ctest_emit(FutoInAsyncSteps* root, int which);
void ctest_check_args(FutoInAsyncSteps* root);
void ctest_forward(FutoInAsyncSteps* root);
void ctest_forward_nested(FutoInAsyncSteps* root);
int ctest_nested_cleanups(void);
void ctest_keep(FutoInAsyncSteps* root);
void ctest_pass_kept(FutoInAsyncSteps* root);
int ctest_cleanups(void);
void ctest_cleanups_reset(void);
void ctest_features(FutoInAsyncSteps* root, int which);
int ctest_counter(int i);
void ctest_counters_reset(void);
void ctest_foreign_thread(FutoInAsyncSteps* root);
void ctest_free_new(void);

/* wait.c */
void ctest_add_wait(FutoInAsyncSteps* bsi);
FutoInAsyncSteps* ctest_waiting(void);
void ctest_complete(FutoInAsyncSteps* bsi, const char* s);
void ctest_fail(FutoInAsyncSteps* bsi, const char* code);
void ctest_add_object_thread(FutoInAsyncSteps* bsi);
int ctest_complete_object(FutoInAsyncSteps* through, FutoInAsyncSteps* bsi);
void ctest_add_refused_success(FutoInAsyncSteps* bsi, int mode, FutoInAsyncSteps* target);
int ctest_object_cleanups(void);
unsigned long ctest_nops(void);
void ctest_add_cross(FutoInAsyncSteps* bsi, int mode, FutoInAsyncSteps* other);
uint32_t ctest_last_object(void);
int ctest_cleanups_of(uint32_t serial);
void ctest_add_late(FutoInAsyncSteps* bsi);
int ctest_late_done(void);

/* bench.c */
void ctest_add_nop(FutoInAsyncSteps* bsi);
void ctest_add_nop_success(FutoInAsyncSteps* bsi);
void ctest_add_nops(FutoInAsyncSteps* bsi, int n);
void ctest_nop(void);
void ctest_callback(void);
void ctestGoNop(void); /* callback.go */

/* reentry.c */
FutoInAsyncSteps* ctest_reentry(FutoInAsyncSteps* host, int where, int what);
void ctest_reentry_execute(void);
void ctest_reentry_free(void);
int ctest_reentry_runaway(void);
void ctest_execute_refused(FutoInAsyncSteps* target);
void ctest_add_execute(FutoInAsyncSteps* bsi, FutoInAsyncSteps* target);
void ctest_execute_retrying(FutoInAsyncSteps* root);

/* nest.c */
void ctest_add_nest(FutoInAsyncSteps* bsi, int mode, FutoInAsyncSteps* other, FutoInAsyncSteps* target);
void ctest_add_nest_wait(FutoInAsyncSteps* bsi);
int ctest_nest_cleanups(void);

/* unhandled.c */
void ctest_unhandled_nested(FutoInAsyncSteps* failing, FutoInAsyncSteps* caller,
        int in_error, int through, int what);

/* fuzz.c */
void ctest_fuzz_begin(const uint8_t* prog, size_t n, FutoInSync* sync);
void ctest_fuzz_start(FutoInAsyncSteps* root);
void ctest_fuzz_away(void);
int ctest_fuzz_live(int spend);
unsigned ctest_fuzz_next(void);
void ctest_fuzz_keep(FutoInAsyncSteps* bsi);
void ctest_fuzz_finish(void);
int ctest_fuzz_pending(void);
const char* ctest_fuzz_problem(void);

/* flows.c */
void ctest_flow(FutoInAsyncSteps* root, int which);
void ctest_flow_ending(FutoInAsyncSteps* host, int mode);
void ctest_flow_free(void);
int ctest_flow_count(int which);

/* threads.c */
void ctest_handler_wait(FutoInAsyncSteps* bsi, int what, int through, int then, int parallel);
void ctest_stack_threads(FutoInAsyncSteps* bsi, FutoInSync* sync, int mode);
void ctest_stack_branches(FutoInAsyncSteps* bsi, int n);
void ctest_stack_branches_end(int fail);
int ctest_threads_count(int which);
void ctest_stack_ends_root(FutoInAsyncSteps* host, int what, int fail);
void ctest_stack_ends_root_free(void);

/* fsync.c */
enum
{
    CTEST_FS_SUCCESS = 0,
    CTEST_FS_ERROR,
    CTEST_FS_BREAK,
    CTEST_FS_CONTINUE,
    CTEST_FS_TIMEOUT,
    CTEST_FS_WAIT,
    CTEST_FS_PARALLEL,
    CTEST_FS_LOCK,
    CTEST_FS_UNLOCK,
    CTEST_FS_NESTED,
};
enum
{
    CTEST_FS_EH_NONE = 0,
    CTEST_FS_EH_SAY,
    CTEST_FS_EH_RECOVER,
    CTEST_FS_EH_SYNC,
};
void ctest_fs_add(FutoInAsyncSteps* bsi, FutoInSync* sync, int mode, int eh, const char* name);
void ctest_fs_add_call(FutoInAsyncSteps* bsi, FutoInSync* sync, int unlock, int what, const char* name);
void ctest_fs_complete_kept(void);
int ctest_fs_cancels(void);
void ctest_fs_reset(void);
FutoInSync* ctest_fs_half_sync(void);
void ctest_fs_call(FutoInAsyncSteps* bsi, FutoInSync* sync, int unlock);
void ctest_fs_add_step(FutoInAsyncSteps* bsi, FutoInSync* sync, const char* name);

#endif
