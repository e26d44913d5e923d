/** \file
 * `tessera::testing::TwoTensor`: an example of a wrapper tensor type (`WrapperTensorImpl`,
 * dispatch.h), the analogue of PyTorch's `TwoTensor` test subclass. It holds two tensors and
 * applies every operator to both halves (kernel launches included), so a test can check that an
 * operator, a `triton_op` or a compiled graph works for tensor subclasses:
 *
 *     Tensor t = tessera::testing::TwoTensor::make(a, b);
 *     Tensor r = mysin(t);                                    // runs on a and on b
 *     auto* w = tessera::wrapper_cast<tessera::testing::TwoTensor>(r);   // w->a_, w->b_
 */
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tessera/dispatch.h"
#include "tessera/tensor.h"

namespace tessera::testing {

/** Two tensors as one; every operator applies to both halves. */
class TwoTensor : public WrapperTensorImpl {
 public:
  TwoTensor(Tensor a, Tensor b)
      : WrapperTensorImpl(a.sizes(), a.dtype(), a.device()), a_(std::move(a)), b_(std::move(b)) {}
  static Tensor make(Tensor a, Tensor b) {
    return make_wrapper<TwoTensor>(std::move(a), std::move(b));
  }
  std::string type_name() const override { return "TwoTensor"; }

  void dispatch(const OperatorHandle& op, Stack& stack) override {
    const size_t n = op.schema().arguments().size();
    Stack first(stack.end() - n, stack.end()), second = first;
    auto unwrap = [](Stack& s, bool use_a) {
      for (auto& v : s) {
        if (v.is_tensor_list()) {  // e.g. the tensors of a kernel launch
          std::vector<Tensor> l = v.to_tensor_list();
          for (auto& t : l) {
            if (auto* w = wrapper_cast<TwoTensor>(t)) t = use_a ? w->a_ : w->b_;
          }
          v = IValue(std::move(l));
          continue;
        }
        if (!v.is_tensor()) continue;
        if (auto* w = wrapper_cast<TwoTensor>(v.to_tensor())) v = use_a ? w->a_ : w->b_;
      }
    };
    unwrap(first, true);
    unwrap(second, false);
    op.call(first);
    op.call(second);
    stack.resize(stack.size() - n);
    for (size_t i = 0; i < first.size(); ++i) {
      if (first[i].is_tensor()) {
        stack.emplace_back(make(first[i].to_tensor(), second[i].to_tensor()));
      } else {
        stack.push_back(first[i]);
      }
    }
  }
  Tensor a_, b_;
};

}  // namespace tessera::testing
