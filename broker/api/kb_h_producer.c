/* Handler for InitProducerId: a fresh id for an idempotent producer, or the
 * transaction coordinator's answer (kb_txn.h) for a transactional one. */
#include "kb_authz.h"
#include "kb_cluster_view.h"
#include "kb_coord_ack.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_txn_coord.h"

static void init_failed(kb_req *req, int16_t err)
{
    kp_init_producer_id_resp *rs = req->response;
    rs->error_code = err;
    rs->producer_id = -1;
    rs->producer_epoch = -1;
}

kp_err kb_h_init_producer_id(kb_req *req, const kp_init_producer_id_req *rq,
                             kp_init_producer_id_resp *rs)
{
    /* Kafka: TRANSACTIONAL_ID WRITE; for an idempotent producer CLUSTER
     * IDEMPOTENT_WRITE or WRITE on some topic. */
    int16_t denied = KP_ERR_NONE;
    if (rq->transactional_id.len >= 0 &&
        !kb_authz(req, KB_OP_WRITE, KB_RES_TRANSACTIONAL_ID, rq->transactional_id))
        denied = KP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    else if (rq->transactional_id.len < 0 && !kb_authz_cluster(req, KB_OP_IDEMPOTENT_WRITE) &&
             !kb_authz_any(req, KB_OP_WRITE, KB_RES_TOPIC))
        denied = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
    if (denied != KP_ERR_NONE) {
        rs->error_code = denied;
        rs->producer_id = -1;
        rs->producer_epoch = -1;
        return KP_ERR_NONE;
    }
    if (rq->transactional_id.len >= 0 &&
        (denied = kb_cv_check_coordinator(req, KB_TXN_COORD_STATE_TOPIC, rq->transactional_id)) !=
            KP_ERR_NONE) {
        rs->error_code = denied;
        rs->producer_id = -1;
        rs->producer_epoch = -1;
        return KP_ERR_NONE;
    }
    if (rq->transactional_id.len >= 0) {
        kp_err e = kb_txn_init_producer(kb_txn_coord_txns(req->broker), rq->transactional_id,
                                        rq->transaction_timeout_ms, rq->producer_id,
                                        rq->producer_epoch, &rs->producer_id, &rs->producer_epoch);
        /* PRODUCER_FENCED is new in v4; older clients know INVALID_PRODUCER_EPOCH. */
        if (e == KP_ERR_PRODUCER_FENCED && req->api_version < 4)
            e = KP_ERR_INVALID_PRODUCER_EPOCH;
        rs->error_code = kp_err_to_wire(e);
        /* answered once the ISR has the id's record */
        return e == KP_ERR_NONE ? kb_coord_ack_txn(req, rq->transactional_id, init_failed)
                                : KP_ERR_NONE;
    }
    /* Without a transactional id Kafka always hands out a fresh id, epoch 0. */
    kp_err e = kb_txn_coord_next_pid(req->broker, &rs->producer_id);
    if (e != KP_ERR_NONE) {
        rs->error_code = kp_err_to_wire(e);
        rs->producer_id = -1;
        return KP_ERR_NONE;
    }
    rs->producer_epoch = 0;
    return KP_ERR_NONE;
}
