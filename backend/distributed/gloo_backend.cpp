#include "distributed/gloo_backend.h"


#include "device.h"
#include "distributed/host_tensors.h"
#include "distributed/host_work.h"

namespace metalx::distributed {

namespace {

using c10d::OpType;
using TensorList = std::vector<at::Tensor>;

TensorList flatten(const std::vector<TensorList>& lists) {
  TensorList all;
  for (const auto& l : lists) all.insert(all.end(), l.begin(), l.end());
  return all;
}

TensorList concat(TensorList a, const TensorList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// One collective: wait for the streams the tensors' values come from, let `call` run
// Gloo on host views made through `host` (HostTensors(op) for a reduction), and wrap
// Gloo's work. `result` is what the Work and its future report (the metalx tensors the
// collective writes).
template <class Call>
c10::intrusive_ptr<c10d::Work> run(int rank, OpType op, const TensorList& touched, TensorList result,
                                   HostTensors host, Call&& call) {
  HostTensors::waitForDevices(touched);
  c10::intrusive_ptr<c10d::Work> inner = call(host);
  return c10::make_intrusive<HostWork>(std::move(inner), std::move(host), std::move(result), op, rank);
}

}  // namespace

GlooBackend::GlooBackend(c10::intrusive_ptr<c10d::Backend> gloo)
    : c10d::Backend(gloo->getRank(), gloo->getSize()), gloo_(std::move(gloo)) {
  // Attached after torch named the group: ProcessGroup::getGroupName reads a backend's uid.
  c10d::Backend::setGroupUid(gloo_->getGroupUid());
  setGroupDesc(gloo_->getGroupDesc());
}

const std::string GlooBackend::getBackendName() const { return gloo_->getBackendName(); }

c10::intrusive_ptr<c10d::Backend::Options> GlooBackend::getBackendOptions() { return gloo_->getBackendOptions(); }

void GlooBackend::setTimeout(std::chrono::milliseconds timeout) { gloo_->setTimeout(timeout); }

void GlooBackend::setSequenceNumberForGroup() { gloo_->setSequenceNumberForGroup(); }

uint64_t GlooBackend::getSequenceNumberForGroup() { return gloo_->getSequenceNumberForGroup(); }

void GlooBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  gloo_->monitoredBarrier(opts, wait_all_ranks);
}

void GlooBackend::setGroupUid(const std::string& pg_uid) {
  c10d::Backend::setGroupUid(pg_uid);
  gloo_->setGroupUid(pg_uid);
}

void GlooBackend::abort() { gloo_->abort(); }

void GlooBackend::shutdown() { gloo_->shutdown(); }

bool GlooBackend::supportsSplitting() const { return gloo_->supportsSplitting(); }

// A split group's metalx collectives run on the Gloo split for its CPU device: metalx's
// Python layer (python/metalx/distributed/_split.py) leaves this backend out of
// ProcessGroup::splitGroup and attaches a GlooBackend to the child. A second split of
// the same Gloo here would rendezvous again beside the CPU device's split, which with
// torch 2.13 can leave one rank waiting for a connection forever.
c10::intrusive_ptr<c10d::Backend> GlooBackend::split(const c10::intrusive_ptr<c10d::Store>&, const std::vector<int>&,
                                                     const c10::intrusive_ptr<Options>&) {
  TORCH_CHECK(false,
              "metalx's Gloo backend is split with its process group's CPU Gloo: split process groups with "
              "torch.distributed.split_group or ProcessGroup.split_group after importing metalx");
  return nullptr;
}

c10::intrusive_ptr<c10d::Work> GlooBackend::broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) {
  return run(getRank(), OpType::BROADCAST, tensors, tensors, HostTensors(), [&](HostTensors& host) {
    TensorList h = host.outputs(tensors);
    return gloo_->broadcast(h, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) {
  return run(getRank(), OpType::ALLREDUCE, tensors, tensors, HostTensors(opts.reduceOp), [&](HostTensors& host) {
    TensorList h = host.outputs(tensors);
    return gloo_->allreduce(h, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::allreduce_coalesced(TensorList& tensors,
                                                                const c10d::AllreduceCoalescedOptions& opts) {
  return run(getRank(), OpType::ALLREDUCE_COALESCED, tensors, tensors,
             HostTensors(opts.reduceOp), [&](HostTensors& host) {
    TensorList h = host.outputs(tensors);
    return gloo_->allreduce_coalesced(h, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::reduce(TensorList& tensors, const c10d::ReduceOptions& opts) {
  return run(getRank(), OpType::REDUCE, tensors, tensors, HostTensors(opts.reduceOp), [&](HostTensors& host) {
    TensorList h = host.outputs(tensors);
    return gloo_->reduce(h, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::allgather(std::vector<TensorList>& outputs, TensorList& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  TensorList out = flatten(outputs);
  return run(getRank(), OpType::ALLGATHER, concat(out, inputs), out, HostTensors(), [&](HostTensors& host) {
    std::vector<TensorList> ho = host.outputs(outputs);
    TensorList hi = host.inputs(inputs);
    return gloo_->allgather(ho, hi, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  return run(getRank(), OpType::_ALLGATHER_BASE, {output, input}, {output}, HostTensors(), [&](HostTensors& host) {
    at::Tensor ho = host.output(output);
    at::Tensor hi = host.input(input);
    return gloo_->_allgather_base(ho, hi, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::allgather_coalesced(std::vector<TensorList>& outputs,
                                                                TensorList& inputs,
                                                                const c10d::AllgatherOptions& opts) {
  TensorList out = flatten(outputs);
  return run(getRank(), OpType::ALLGATHER_COALESCED, concat(out, inputs), out, HostTensors(), [&](HostTensors& host) {
    std::vector<TensorList> ho = host.outputs(outputs);
    TensorList hi = host.inputs(inputs);
    return gloo_->allgather_coalesced(ho, hi, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::allgather_into_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                            const c10d::AllgatherOptions& opts) {
  return run(getRank(), OpType::COALESCED, concat(outputs, inputs), outputs, HostTensors(), [&](HostTensors& host) {
    TensorList ho = host.outputs(outputs);
    TensorList hi = host.inputs(inputs);
    return gloo_->allgather_into_tensor_coalesced(ho, hi, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::gather(std::vector<TensorList>& outputs, TensorList& inputs,
                                                   const c10d::GatherOptions& opts) {
  TensorList out = flatten(outputs);
  return run(getRank(), OpType::GATHER, concat(out, inputs), out, HostTensors(), [&](HostTensors& host) {
    std::vector<TensorList> ho = host.outputs(outputs);
    TensorList hi = host.inputs(inputs);
    return gloo_->gather(ho, hi, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  return run(getRank(), OpType::SCATTER, concat(outputs, flatten(inputs)), outputs,
             HostTensors(), [&](HostTensors& host) {
    TensorList ho = host.outputs(outputs);
    std::vector<TensorList> hi;
    for (const TensorList& l : inputs) hi.push_back(host.inputs(l));
    return gloo_->scatter(ho, hi, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::reduce_scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                                           const c10d::ReduceScatterOptions& opts) {
  return run(getRank(), OpType::REDUCE_SCATTER, concat(outputs, flatten(inputs)), outputs,
             HostTensors(opts.reduceOp), [&](HostTensors& host) {
               TensorList ho = host.outputs(outputs);
               std::vector<TensorList> hi;
               for (const TensorList& l : inputs) hi.push_back(host.inputs(l));
               return gloo_->reduce_scatter(ho, hi, opts);
             });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::ReduceScatterOptions& opts) {
  return run(getRank(), OpType::_REDUCE_SCATTER_BASE, {output, input}, {output},
             HostTensors(opts.reduceOp), [&](HostTensors& host) {
    at::Tensor ho = host.output(output);
    at::Tensor hi = host.input(input);
    return gloo_->_reduce_scatter_base(ho, hi, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::reduce_scatter_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                            const c10d::ReduceScatterOptions& opts) {
  return run(getRank(), OpType::REDUCE_SCATTER_TENSOR_COALESCED, concat(outputs, inputs), outputs,
             HostTensors(opts.reduceOp), [&](HostTensors& host) {
               TensorList ho = host.outputs(outputs);
               TensorList hi = host.inputs(inputs);
               return gloo_->reduce_scatter_tensor_coalesced(ho, hi, opts);
             });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& output_split_sizes,
                                                          std::vector<int64_t>& input_split_sizes,
                                                          const c10d::AllToAllOptions& opts) {
  return run(getRank(), OpType::ALLTOALL_BASE, {output, input}, {output}, HostTensors(), [&](HostTensors& host) {
    at::Tensor ho = host.output(output);
    at::Tensor hi = host.input(input);
    return gloo_->alltoall_base(ho, hi, output_split_sizes, input_split_sizes, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::alltoall(TensorList& outputs, TensorList& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  return run(getRank(), OpType::ALLTOALL, concat(outputs, inputs), outputs, HostTensors(), [&](HostTensors& host) {
    TensorList ho = host.outputs(outputs);
    TensorList hi = host.inputs(inputs);
    return gloo_->alltoall(ho, hi, opts);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::send(TensorList& tensors, int dst_rank, int tag) {
  return run(getRank(), OpType::SEND, tensors, tensors, HostTensors(), [&](HostTensors& host) {
    TensorList h = host.inputs(tensors);
    return gloo_->send(h, dst_rank, tag);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::recv(TensorList& tensors, int src_rank, int tag) {
  return run(getRank(), OpType::RECV, tensors, tensors, HostTensors(), [&](HostTensors& host) {
    TensorList h = host.outputs(tensors);
    return gloo_->recv(h, src_rank, tag);
  });
}

c10::intrusive_ptr<c10d::Work> GlooBackend::recvAnysource(TensorList& tensors, int tag) {
  return run(getRank(), OpType::RECVANYSOURCE, tensors, tensors, HostTensors(), [&](HostTensors& host) {
    TensorList h = host.outputs(tensors);
    return gloo_->recvAnysource(h, tag);
  });
}

// A barrier on a metalx device also waits for the work queued on its current stream, so
// that what a rank did on the device before the barrier is done when it passes it.
c10::intrusive_ptr<c10d::Work> GlooBackend::barrier(const c10d::BarrierOptions& opts) {
  if (opts.device && opts.device->type() == c10::DeviceType::PrivateUse1 && opts.device->has_index()) {
    synchronizeCurrentStream(opts.device->index());
  }
  return run(getRank(), OpType::BARRIER, {}, {}, HostTensors(), [&](HostTensors&) { return gloo_->barrier(opts); });
}

}  // namespace metalx::distributed
