module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<f16>, %arg1: tensor<1x1x3x13xui8>, %arg2: tensor<3xi1>) -> (tensor<i1> {jax.result_info = "result[0]"}, tensor<3xui8> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.compare LE, %arg0, %arg0, FLOAT : (tensor<f16>, tensor<f16>) -> tensor<i1>
    %c = stablehlo.constant dense<true> : tensor<i1>
    %c_0 = stablehlo.constant dense<true> : tensor<i1>
    %1 = stablehlo.clamp %c, %0, %c_0 : tensor<i1>
    %c_1 = stablehlo.constant dense<255> : tensor<ui8>
    %2 = stablehlo.reduce(%arg1 init: %c_1) applies stablehlo.minimum across dimensions = [0, 1, 3] : (tensor<1x1x3x13xui8>, tensor<ui8>) -> tensor<3xui8>
    %3 = call @cumsum(%2) : (tensor<3xui8>) -> tensor<3xui8>
    %4 = stablehlo.select %arg2, %3, %3 : tensor<3xi1>, tensor<3xui8>
    return %1, %4 : tensor<i1>, tensor<3xui8>
  }
  func.func private @cumsum(%arg0: tensor<3xui8>) -> tensor<3xui8> {
    %c = stablehlo.constant dense<0> : tensor<ui8>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui8>) -> tensor<ui8>
    %1 = "stablehlo.reduce_window"(%arg0, %0) <{base_dilations = array<i64: 1>, padding = dense<[[0, 2]]> : tensor<1x2xi64>, window_dilations = array<i64: 1>, window_dimensions = array<i64: 3>, window_strides = array<i64: 1>}> ({
    ^bb0(%arg1: tensor<ui8>, %arg2: tensor<ui8>):
      %2 = stablehlo.add %arg1, %arg2 : tensor<ui8>
      stablehlo.return %2 : tensor<ui8>
    }) : (tensor<3xui8>, tensor<ui8>) -> tensor<3xui8>
    return %1 : tensor<3xui8>
  }
}
