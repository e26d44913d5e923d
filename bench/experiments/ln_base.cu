// clang-format off
// (the text as tessera generated it: ln_variants.py edits it by pattern)
// The CUDA tessera generated for examples/layer_norm.h (bf16, BLOCK_SIZE 4096, 8 warps) at
// b80c8c3 (TESSERA_DUMP=src), before hardware conversions: ln_variants.py edits it. (Compiled
// with today's trt headers its float_to_bf16 is the hardware's too: 'base' then measures that.)
extern "C" __global__ void __launch_bounds__(256) tessera_kernel(const trt::Grid _gv, const _Slots _s) {
  extern __shared__ __align__(16) unsigned char _smem[];
  const trt::Grid* const _g = &_gv;
  const trt::Arg* const _a = _s.a;
  const int32_t _pid0 = (int32_t)blockIdx.x, _pid1 = (int32_t)blockIdx.y, _pid2 = (int32_t)blockIdx.z;
  const int32_t _tid = (int32_t)threadIdx.x;
  (void)_g; (void)_a; (void)_pid0; (void)_pid1; (void)_pid2; (void)_tid;
  uint16_t* const v0 = (uint16_t*)_a[0].p;  // X
  uint16_t* const v1 = (uint16_t*)_a[1].p;  // Y
  uint16_t* const v2 = (uint16_t*)_a[2].p;  // W
  uint16_t* const v3 = (uint16_t*)_a[3].p;  // B
  float* const v4 = (float*)_a[4].p;  // Mean
  float* const v5 = (float*)_a[5].p;  // Rstd
  int32_t const v6 = (int32_t)_a[6].i;  // stride
  int32_t const v7 = (int32_t)_a[7].i;  // N
  float const v8 = (float)_a[8].f;  // eps
  int32_t const v10 = _pid0;
  int32_t const v11 = ((int32_t)(v10 * v6));
  uint16_t* const v12 = (v0 + (int64_t)(v11));
  uint16_t* const v14 = (v1 + (int64_t)(v11));
  float v20[16];
  #pragma unroll
  for (int32_t _k1 = 0; _k1 < 16; ++_k1) {
    const int32_t _e0 = (_k1 / 8 * 256 + _tid) * 8 + _k1 % 8;
    const int32_t _i2 = _e0;
    v20[_k1] = (0x0p+0f);
  }
  for (int32_t v19 = ((int32_t)0LL); v19 < v7; v19 += ((int32_t)4096LL)) {
    float v32[16];
    #pragma unroll
    for (int32_t _g3 = 0; _g3 < 2; ++_g3) {
      const int32_t _e4 = (_g3 * 256 + _tid) * 8;
      const int32_t _i5 = _e4;
      if (((((int32_t)(v19 + ((int32_t)(0 + _i5)))) < v7))) {
        const trt::Vec<uint16_t, 8> _vt6 = *(const trt::Vec<uint16_t, 8>*)((v12 + ((int64_t)(v19) + ((int64_t)0 + _i5))));
        v32[_g3 * 8 + 0] = trt::bf16_to_float(_vt6.v[0]);
        v32[_g3 * 8 + 1] = trt::bf16_to_float(_vt6.v[1]);
        v32[_g3 * 8 + 2] = trt::bf16_to_float(_vt6.v[2]);
        v32[_g3 * 8 + 3] = trt::bf16_to_float(_vt6.v[3]);
        v32[_g3 * 8 + 4] = trt::bf16_to_float(_vt6.v[4]);
        v32[_g3 * 8 + 5] = trt::bf16_to_float(_vt6.v[5]);
        v32[_g3 * 8 + 6] = trt::bf16_to_float(_vt6.v[6]);
        v32[_g3 * 8 + 7] = trt::bf16_to_float(_vt6.v[7]);
      } else {
        v32[(_g3 * 8 + 0)] = (0x0p+0f);
        v32[(_g3 * 8 + 1)] = (0x0p+0f);
        v32[(_g3 * 8 + 2)] = (0x0p+0f);
        v32[(_g3 * 8 + 3)] = (0x0p+0f);
        v32[(_g3 * 8 + 4)] = (0x0p+0f);
        v32[(_g3 * 8 + 5)] = (0x0p+0f);
        v32[(_g3 * 8 + 6)] = (0x0p+0f);
        v32[(_g3 * 8 + 7)] = (0x0p+0f);
      }
    }
    float _t7[16];
    #pragma unroll
    for (int32_t _k9 = 0; _k9 < 16; ++_k9) {
      const int32_t _e8 = (_k9 / 8 * 256 + _tid) * 8 + _k9 % 8;
      const int32_t _i10 = _e8;
      _t7[_k9] = (v20[_k9] + ((float)(v32[_k9])));
    }
    #pragma unroll
    for (int32_t _k12 = 0; _k12 < 16; ++_k12) {
      const int32_t _e11 = (_k12 / 8 * 256 + _tid) * 8 + _k12 % 8;
      const int32_t _i13 = _e11;
      v20[_k12] = _t7[_k12];
    }
  }
  auto& v35 = v20;
  float _acc14 = 0.0;
  #pragma unroll
  for (int32_t _k19 = 0; _k19 < 16; ++_k19) {
    const int32_t _e18 = (_k19 / 8 * 256 + _tid) * 8 + _k19 % 8;
    const int32_t _i20 = _e18;
    _acc14 = (_acc14 + v35[_k19]);
  }
  for (int _m15 = 16; _m15 >= 1; _m15 >>= 1) {
    float const _sh21 = trt::shfl_xor(_acc14, _m15);
    _acc14 = (_acc14 + _sh21);
  }
  float* const _part17 = (float*)(_smem + 0);
  if ((_tid & 31) == 0) _part17[_tid >> 5] = _acc14;
  __syncthreads();
  _acc14 = _part17[0];
  for (int _w16 = 1; _w16 < 8; ++_w16) _acc14 = (_acc14 + _part17[_w16]);
  float const v36 = _acc14;
  float const v37 = ((float)(v7));
  float const v38 = (v36 / v37);
  float v45[16];
  #pragma unroll
  for (int32_t _k23 = 0; _k23 < 16; ++_k23) {
    const int32_t _e22 = (_k23 / 8 * 256 + _tid) * 8 + _k23 % 8;
    const int32_t _i24 = _e22;
    v45[_k23] = (0x0p+0f);
  }
  for (int32_t v43 = ((int32_t)0LL); v43 < v7; v43 += ((int32_t)4096LL)) {
    float v57[16];
    #pragma unroll
    for (int32_t _g25 = 0; _g25 < 2; ++_g25) {
      const int32_t _e26 = (_g25 * 256 + _tid) * 8;
      const int32_t _i27 = _e26;
      if (((((int32_t)(v43 + ((int32_t)(0 + _i27)))) < v7))) {
        const trt::Vec<uint16_t, 8> _vt28 = *(const trt::Vec<uint16_t, 8>*)((v12 + ((int64_t)(v43) + ((int64_t)0 + _i27))));
        v57[_g25 * 8 + 0] = trt::bf16_to_float(_vt28.v[0]);
        v57[_g25 * 8 + 1] = trt::bf16_to_float(_vt28.v[1]);
        v57[_g25 * 8 + 2] = trt::bf16_to_float(_vt28.v[2]);
        v57[_g25 * 8 + 3] = trt::bf16_to_float(_vt28.v[3]);
        v57[_g25 * 8 + 4] = trt::bf16_to_float(_vt28.v[4]);
        v57[_g25 * 8 + 5] = trt::bf16_to_float(_vt28.v[5]);
        v57[_g25 * 8 + 6] = trt::bf16_to_float(_vt28.v[6]);
        v57[_g25 * 8 + 7] = trt::bf16_to_float(_vt28.v[7]);
      } else {
        v57[(_g25 * 8 + 0)] = (0x0p+0f);
        v57[(_g25 * 8 + 1)] = (0x0p+0f);
        v57[(_g25 * 8 + 2)] = (0x0p+0f);
        v57[(_g25 * 8 + 3)] = (0x0p+0f);
        v57[(_g25 * 8 + 4)] = (0x0p+0f);
        v57[(_g25 * 8 + 5)] = (0x0p+0f);
        v57[(_g25 * 8 + 6)] = (0x0p+0f);
        v57[(_g25 * 8 + 7)] = (0x0p+0f);
      }
    }
    float _t29[16];
    #pragma unroll
    for (int32_t _k31 = 0; _k31 < 16; ++_k31) {
      const int32_t _e30 = (_k31 / 8 * 256 + _tid) * 8 + _k31 % 8;
      const int32_t _i32 = _e30;
      _t29[_k31] = (v45[_k31] + (((((int32_t)(v43 + ((int32_t)(0 + _i32)))) < v7) ? (((float)(v57[_k31])) - v38) : (0x0p+0f)) * ((((int32_t)(v43 + ((int32_t)(0 + _i32)))) < v7) ? (((float)(v57[_k31])) - v38) : (0x0p+0f))));
    }
    #pragma unroll
    for (int32_t _k34 = 0; _k34 < 16; ++_k34) {
      const int32_t _e33 = (_k34 / 8 * 256 + _tid) * 8 + _k34 % 8;
      const int32_t _i35 = _e33;
      v45[_k34] = _t29[_k34];
    }
  }
  auto& v68 = v45;
  float _acc36 = 0.0;
  #pragma unroll
  for (int32_t _k41 = 0; _k41 < 16; ++_k41) {
    const int32_t _e40 = (_k41 / 8 * 256 + _tid) * 8 + _k41 % 8;
    const int32_t _i42 = _e40;
    _acc36 = (_acc36 + v68[_k41]);
  }
  for (int _m37 = 16; _m37 >= 1; _m37 >>= 1) {
    float const _sh43 = trt::shfl_xor(_acc36, _m37);
    _acc36 = (_acc36 + _sh43);
  }
  float* const _part39 = (float*)(_smem + 32);
  if ((_tid & 31) == 0) _part39[_tid >> 5] = _acc36;
  __syncthreads();
  _acc36 = _part39[0];
  for (int _w38 = 1; _w38 < 8; ++_w38) _acc36 = (_acc36 + _part39[_w38]);
  float const v69 = _acc36;
  float const v71 = (v69 / v37);
  float const v72 = (v71 + v8);
  float const v73 = trt::sqrt(v72);
  float const v76 = ((0x1p+0f) / v73);
  float* const v77 = (v4 + (int64_t)(v10));
  if (_tid == 0) {
    *v77 = v38;
  }
  __syncthreads();
  float* const v78 = (v5 + (int64_t)(v10));
  if (_tid == 0) {
    *v78 = v76;
  }
  __syncthreads();
  for (int32_t v80 = ((int32_t)0LL); v80 < v7; v80 += ((int32_t)4096LL)) {
    float v93[16];
    #pragma unroll
    for (int32_t _g44 = 0; _g44 < 2; ++_g44) {
      const int32_t _e45 = (_g44 * 256 + _tid) * 8;
      const int32_t _i46 = _e45;
      if (((((int32_t)(v80 + ((int32_t)(0 + _i46)))) < v7))) {
        const trt::Vec<uint16_t, 8> _vt47 = *(const trt::Vec<uint16_t, 8>*)((v2 + ((int64_t)(v80) + ((int64_t)0 + _i46))));
        v93[_g44 * 8 + 0] = trt::bf16_to_float(_vt47.v[0]);
        v93[_g44 * 8 + 1] = trt::bf16_to_float(_vt47.v[1]);
        v93[_g44 * 8 + 2] = trt::bf16_to_float(_vt47.v[2]);
        v93[_g44 * 8 + 3] = trt::bf16_to_float(_vt47.v[3]);
        v93[_g44 * 8 + 4] = trt::bf16_to_float(_vt47.v[4]);
        v93[_g44 * 8 + 5] = trt::bf16_to_float(_vt47.v[5]);
        v93[_g44 * 8 + 6] = trt::bf16_to_float(_vt47.v[6]);
        v93[_g44 * 8 + 7] = trt::bf16_to_float(_vt47.v[7]);
      } else {
        v93[(_g44 * 8 + 0)] = (0x0p+0f);
        v93[(_g44 * 8 + 1)] = (0x0p+0f);
        v93[(_g44 * 8 + 2)] = (0x0p+0f);
        v93[(_g44 * 8 + 3)] = (0x0p+0f);
        v93[(_g44 * 8 + 4)] = (0x0p+0f);
        v93[(_g44 * 8 + 5)] = (0x0p+0f);
        v93[(_g44 * 8 + 6)] = (0x0p+0f);
        v93[(_g44 * 8 + 7)] = (0x0p+0f);
      }
    }
    float v98[16];
    #pragma unroll
    for (int32_t _g48 = 0; _g48 < 2; ++_g48) {
      const int32_t _e49 = (_g48 * 256 + _tid) * 8;
      const int32_t _i50 = _e49;
      if (((((int32_t)(v80 + ((int32_t)(0 + _i50)))) < v7))) {
        const trt::Vec<uint16_t, 8> _vt51 = *(const trt::Vec<uint16_t, 8>*)((v3 + ((int64_t)(v80) + ((int64_t)0 + _i50))));
        v98[_g48 * 8 + 0] = trt::bf16_to_float(_vt51.v[0]);
        v98[_g48 * 8 + 1] = trt::bf16_to_float(_vt51.v[1]);
        v98[_g48 * 8 + 2] = trt::bf16_to_float(_vt51.v[2]);
        v98[_g48 * 8 + 3] = trt::bf16_to_float(_vt51.v[3]);
        v98[_g48 * 8 + 4] = trt::bf16_to_float(_vt51.v[4]);
        v98[_g48 * 8 + 5] = trt::bf16_to_float(_vt51.v[5]);
        v98[_g48 * 8 + 6] = trt::bf16_to_float(_vt51.v[6]);
        v98[_g48 * 8 + 7] = trt::bf16_to_float(_vt51.v[7]);
      } else {
        v98[(_g48 * 8 + 0)] = (0x0p+0f);
        v98[(_g48 * 8 + 1)] = (0x0p+0f);
        v98[(_g48 * 8 + 2)] = (0x0p+0f);
        v98[(_g48 * 8 + 3)] = (0x0p+0f);
        v98[(_g48 * 8 + 4)] = (0x0p+0f);
        v98[(_g48 * 8 + 5)] = (0x0p+0f);
        v98[(_g48 * 8 + 6)] = (0x0p+0f);
        v98[(_g48 * 8 + 7)] = (0x0p+0f);
      }
    }
    float v104[16];
    #pragma unroll
    for (int32_t _g52 = 0; _g52 < 2; ++_g52) {
      const int32_t _e53 = (_g52 * 256 + _tid) * 8;
      const int32_t _i54 = _e53;
      if (((((int32_t)(v80 + ((int32_t)(0 + _i54)))) < v7))) {
        const trt::Vec<uint16_t, 8> _vt55 = *(const trt::Vec<uint16_t, 8>*)((v12 + ((int64_t)(v80) + ((int64_t)0 + _i54))));
        v104[_g52 * 8 + 0] = trt::bf16_to_float(_vt55.v[0]);
        v104[_g52 * 8 + 1] = trt::bf16_to_float(_vt55.v[1]);
        v104[_g52 * 8 + 2] = trt::bf16_to_float(_vt55.v[2]);
        v104[_g52 * 8 + 3] = trt::bf16_to_float(_vt55.v[3]);
        v104[_g52 * 8 + 4] = trt::bf16_to_float(_vt55.v[4]);
        v104[_g52 * 8 + 5] = trt::bf16_to_float(_vt55.v[5]);
        v104[_g52 * 8 + 6] = trt::bf16_to_float(_vt55.v[6]);
        v104[_g52 * 8 + 7] = trt::bf16_to_float(_vt55.v[7]);
      } else {
        v104[(_g52 * 8 + 0)] = (0x0p+0f);
        v104[(_g52 * 8 + 1)] = (0x0p+0f);
        v104[(_g52 * 8 + 2)] = (0x0p+0f);
        v104[(_g52 * 8 + 3)] = (0x0p+0f);
        v104[(_g52 * 8 + 4)] = (0x0p+0f);
        v104[(_g52 * 8 + 5)] = (0x0p+0f);
        v104[(_g52 * 8 + 6)] = (0x0p+0f);
        v104[(_g52 * 8 + 7)] = (0x0p+0f);
      }
    }
    #pragma unroll
    for (int32_t _g56 = 0; _g56 < 2; ++_g56) {
      const int32_t _e57 = (_g56 * 256 + _tid) * 8;
      const int32_t _i58 = _e57;
      trt::Vec<uint16_t, 8> _sv59;
      _sv59.v[0] = trt::float_to_bf16(trt::round_bf16(((float)(((((((float)(v104[(_g56 * 8 + 0)])) - v38) * v76) * ((float)(v93[(_g56 * 8 + 0)]))) + ((float)(v98[(_g56 * 8 + 0)])))))));
      _sv59.v[1] = trt::float_to_bf16(trt::round_bf16(((float)(((((((float)(v104[(_g56 * 8 + 1)])) - v38) * v76) * ((float)(v93[(_g56 * 8 + 1)]))) + ((float)(v98[(_g56 * 8 + 1)])))))));
      _sv59.v[2] = trt::float_to_bf16(trt::round_bf16(((float)(((((((float)(v104[(_g56 * 8 + 2)])) - v38) * v76) * ((float)(v93[(_g56 * 8 + 2)]))) + ((float)(v98[(_g56 * 8 + 2)])))))));
      _sv59.v[3] = trt::float_to_bf16(trt::round_bf16(((float)(((((((float)(v104[(_g56 * 8 + 3)])) - v38) * v76) * ((float)(v93[(_g56 * 8 + 3)]))) + ((float)(v98[(_g56 * 8 + 3)])))))));
      _sv59.v[4] = trt::float_to_bf16(trt::round_bf16(((float)(((((((float)(v104[(_g56 * 8 + 4)])) - v38) * v76) * ((float)(v93[(_g56 * 8 + 4)]))) + ((float)(v98[(_g56 * 8 + 4)])))))));
      _sv59.v[5] = trt::float_to_bf16(trt::round_bf16(((float)(((((((float)(v104[(_g56 * 8 + 5)])) - v38) * v76) * ((float)(v93[(_g56 * 8 + 5)]))) + ((float)(v98[(_g56 * 8 + 5)])))))));
      _sv59.v[6] = trt::float_to_bf16(trt::round_bf16(((float)(((((((float)(v104[(_g56 * 8 + 6)])) - v38) * v76) * ((float)(v93[(_g56 * 8 + 6)]))) + ((float)(v98[(_g56 * 8 + 6)])))))));
      _sv59.v[7] = trt::float_to_bf16(trt::round_bf16(((float)(((((((float)(v104[(_g56 * 8 + 7)])) - v38) * v76) * ((float)(v93[(_g56 * 8 + 7)]))) + ((float)(v98[(_g56 * 8 + 7)])))))));
      if (((((int32_t)(v80 + ((int32_t)(0 + _i58)))) < v7))) {
        *(trt::Vec<uint16_t, 8>*)((v14 + ((int64_t)(v80) + ((int64_t)0 + _i58)))) = _sv59;
      }
    }
    __syncthreads();
  }
}

