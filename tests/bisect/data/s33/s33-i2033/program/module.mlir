module @jit_program attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x7xf16> {mhlo.sharding = "{replicated}"}, %arg1: tensor<2x17xbf16> {mhlo.sharding = "{replicated}"}, %arg2: tensor<2x7xui32> {mhlo.sharding = "{replicated}"}, %arg3: tensor<2x7xui32> {mhlo.sharding = "{replicated}"}, %arg4: tensor<2x2xf16> {mhlo.sharding = "{replicated}"}, %arg5: tensor<i1> {mhlo.sharding = "{replicated}"}) -> (tensor<2x7xf32> {jax.result_info = "result[0]", mhlo.sharding = "{replicated}"}, tensor<2x7x1xf16> {jax.result_info = "result[1]", mhlo.sharding = "{replicated}"}, tensor<4x14xf16> {jax.result_info = "result[2]", mhlo.sharding = "{devices=[4,1]<=[4]}"}, tensor<f16> {jax.result_info = "result[3]", mhlo.sharding = "{replicated}"}) {
    %0 = stablehlo.convert %arg0 : (tensor<2x7xf16>) -> tensor<2x7xui32>
    %1 = stablehlo.abs %arg0 : tensor<2x7xf16>
    %cst = stablehlo.constant dense<5.000000e-01> : tensor<f16>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f16>) -> tensor<2x7xf16>
    %3 = stablehlo.add %1, %2 : tensor<2x7xf16>
    %4 = chlo.lgamma %3 : tensor<2x7xf16> -> tensor<2x7xf16>
    %5 = "stablehlo.sort"(%arg1) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%arg6: tensor<bf16>, %arg7: tensor<bf16>):
      %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
      %36 = stablehlo.compare EQ, %arg6, %cst_5, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
      %cst_6 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
      %37 = stablehlo.select %36, %cst_6, %arg6 : tensor<i1>, tensor<bf16>
      %38 = stablehlo.compare NE, %arg6, %arg6, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
      %cst_7 = stablehlo.constant dense<0x7FC0> : tensor<bf16>
      %39 = stablehlo.select %38, %cst_7, %37 : tensor<i1>, tensor<bf16>
      %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
      %40 = stablehlo.compare EQ, %arg7, %cst_8, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
      %cst_9 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
      %41 = stablehlo.select %40, %cst_9, %arg7 : tensor<i1>, tensor<bf16>
      %42 = stablehlo.compare NE, %arg7, %arg7, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
      %cst_10 = stablehlo.constant dense<0x7FC0> : tensor<bf16>
      %43 = stablehlo.select %42, %cst_10, %41 : tensor<i1>, tensor<bf16>
      %44 = stablehlo.compare LT, %39, %43, TOTALORDER : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
      stablehlo.return %44 : tensor<i1>
    }) : (tensor<2x17xbf16>) -> tensor<2x17xbf16>
    %6 = stablehlo.abs %4 : tensor<2x7xf16>
    %cst_0 = stablehlo.constant dense<5.000000e-01> : tensor<f16>
    %7 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f16>) -> tensor<2x7xf16>
    %8 = stablehlo.add %6, %7 : tensor<2x7xf16>
    %cst_1 = stablehlo.constant dense<-8.000000e+00> : tensor<f16>
    %cst_2 = stablehlo.constant dense<8.000000e+00> : tensor<f16>
    %9 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f16>) -> tensor<2x7xf16>
    %10 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f16>) -> tensor<2x7xf16>
    %11 = stablehlo.clamp %9, %arg0, %10 : tensor<2x7xf16>
    %12 = stablehlo.power %8, %11 : tensor<2x7xf16>
    %13 = stablehlo.shift_right_logical %0, %arg2 : tensor<2x7xui32>
    %14 = stablehlo.compare GE, %arg2, %arg3, UNSIGNED : (tensor<2x7xui32>, tensor<2x7xui32>) -> tensor<2x7xi1>
    %15 = stablehlo.custom_call @Sharding(%arg4) {backend_config = "", mhlo.sharding = "{replicated}"} : (tensor<2x2xf16>) -> tensor<2x2xf16>
    %16 = stablehlo.custom_call @SPMDFullToShardShape(%15) {backend_config = "", mhlo.sharding = "{manual}"} : (tensor<2x2xf16>) -> tensor<2x2xf16>
    %17 = call @shmap_body(%16) : (tensor<2x2xf16>) -> tensor<2x2xf16>
    %18 = stablehlo.custom_call @Sharding(%17) {backend_config = "", mhlo.sharding = "{manual}"} : (tensor<2x2xf16>) -> tensor<2x2xf16>
    %19 = stablehlo.custom_call @SPMDShardToFullShape(%18) {backend_config = "", mhlo.sharding = "{replicated}"} : (tensor<2x2xf16>) -> tensor<2x2xf16>
    %20 = stablehlo.dot_general %12, %19, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x7xf16>, tensor<2x2xf16>) -> tensor<7x2xf16>
    %21 = stablehlo.bitcast_convert %arg3 : (tensor<2x7xui32>) -> tensor<2x7xf32>
    %c = stablehlo.constant dense<false> : tensor<i1>
    %22 = stablehlo.reduce(%14 init: %c) applies stablehlo.or across dimensions = [0] : (tensor<2x7xi1>, tensor<i1>) -> tensor<7xi1>
    %23 = chlo.next_after %21, %21 : tensor<2x7xf32>, tensor<2x7xf32> -> tensor<2x7xf32>
    %24 = stablehlo.compare LE, %21, %23, FLOAT : (tensor<2x7xf32>, tensor<2x7xf32>) -> tensor<2x7xi1>
    %25 = stablehlo.select %24, %23, %21 : tensor<2x7xi1>, tensor<2x7xf32>
    %26 = stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<2x7xf16>) -> tensor<2x7x1xf16>
    %27 = stablehlo.custom_call @Sharding(%26) {backend_config = "", mhlo.sharding = "{replicated}"} : (tensor<2x7x1xf16>) -> tensor<2x7x1xf16>
    %28 = stablehlo.custom_call @SPMDFullToShardShape(%27) {backend_config = "", mhlo.sharding = "{manual}"} : (tensor<2x7x1xf16>) -> tensor<2x7x1xf16>
    %29 = call @shmap_body_0(%28) : (tensor<2x7x1xf16>) -> tensor<2x7x1xf16>
    %30 = stablehlo.custom_call @Sharding(%29) {backend_config = "", mhlo.sharding = "{manual}"} : (tensor<2x7x1xf16>) -> tensor<2x7x1xf16>
    %31 = stablehlo.custom_call @SPMDShardToFullShape(%30) {backend_config = "", mhlo.sharding = "{replicated}"} : (tensor<2x7x1xf16>) -> tensor<2x7x1xf16>
    %cst_3 = stablehlo.constant dense<-2.500000e+00> : tensor<f16>
    %32 = stablehlo.pad %arg0, %cst_3, low = [-1, 0], high = [2, 1], interior = [1, 1] : (tensor<2x7xf16>, tensor<f16>) -> tensor<4x14xf16>
    %33 = stablehlo.convert %arg5 : (tensor<i1>) -> tensor<i32>
    %34 = "stablehlo.case"(%33) ({
      %36 = stablehlo.multiply %32, %32 : tensor<4x14xf16>
      stablehlo.return %36 : tensor<4x14xf16>
    }, {
      %36 = stablehlo.multiply %32, %32 : tensor<4x14xf16>
      stablehlo.return %36 : tensor<4x14xf16>
    }) : (tensor<i32>) -> tensor<4x14xf16>
    %cst_4 = stablehlo.constant dense<0x7C00> : tensor<f16>
    %35 = stablehlo.reduce(%32 init: %cst_4) applies stablehlo.minimum across dimensions = [0, 1] : (tensor<4x14xf16>, tensor<f16>) -> tensor<f16>
    return %25, %31, %34, %35 : tensor<2x7xf32>, tensor<2x7x1xf16>, tensor<4x14xf16>, tensor<f16>
  }
  func.func private @shmap_body(%arg0: tensor<2x2xf16>) -> (tensor<2x2xf16> {jax.result_info = "[None, None]"}) {
    %c = stablehlo.constant dense<1> : tensor<ui32>
    %c_0 = stablehlo.constant dense<4> : tensor<ui32>
    %0 = stablehlo.partition_id : tensor<ui32>
    %1 = stablehlo.divide %0, %c : tensor<ui32>
    %2 = stablehlo.remainder %1, %c_0 : tensor<ui32>
    %3 = stablehlo.convert %2 : (tensor<ui32>) -> tensor<i32>
    %c_1 = stablehlo.constant dense<3> : tensor<i32>
    %4 = stablehlo.compare EQ, %3, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %cst = stablehlo.constant dense<0xFC00> : tensor<f16>
    %5 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f16>) -> tensor<2x2xf16>
    %6 = call @_where(%4, %arg0, %5) : (tensor<i1>, tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xf16>
    %7 = "stablehlo.all_reduce"(%6) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
    ^bb0(%arg1: tensor<f16>, %arg2: tensor<f16>):
      %8 = stablehlo.maximum %arg1, %arg2 : tensor<f16>
      stablehlo.return %8 : tensor<f16>
    }) : (tensor<2x2xf16>) -> tensor<2x2xf16>
    return %7 : tensor<2x2xf16>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<2x2xf16>, %arg2: tensor<2x2xf16>) -> tensor<2x2xf16> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<2x2xf16>
    return %0 : tensor<2x2xf16>
  }
  func.func private @shmap_body_0(%arg0: tensor<2x7x1xf16>) -> (tensor<2x7x1xf16> {jax.result_info = "[None, None, None]"}) {
    %c = stablehlo.constant dense<1> : tensor<ui32>
    %c_0 = stablehlo.constant dense<4> : tensor<ui32>
    %0 = stablehlo.partition_id : tensor<ui32>
    %1 = stablehlo.divide %0, %c : tensor<ui32>
    %2 = stablehlo.remainder %1, %c_0 : tensor<ui32>
    %3 = stablehlo.convert %2 : (tensor<ui32>) -> tensor<i32>
    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %4 = stablehlo.compare EQ, %3, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %cst = stablehlo.constant dense<0xFC00> : tensor<f16>
    %5 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f16>) -> tensor<2x7x1xf16>
    %6 = call @_where_1(%4, %arg0, %5) : (tensor<i1>, tensor<2x7x1xf16>, tensor<2x7x1xf16>) -> tensor<2x7x1xf16>
    %7 = "stablehlo.all_reduce"(%6) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
    ^bb0(%arg1: tensor<f16>, %arg2: tensor<f16>):
      %8 = stablehlo.maximum %arg1, %arg2 : tensor<f16>
      stablehlo.return %8 : tensor<f16>
    }) : (tensor<2x7x1xf16>) -> tensor<2x7x1xf16>
    return %7 : tensor<2x7x1xf16>
  }
  func.func private @_where_1(%arg0: tensor<i1>, %arg1: tensor<2x7x1xf16>, %arg2: tensor<2x7x1xf16>) -> tensor<2x7x1xf16> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<2x7x1xf16>
    return %0 : tensor<2x7x1xf16>
  }
}
