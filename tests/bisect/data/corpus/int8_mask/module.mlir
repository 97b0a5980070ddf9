module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<12xi32>, %arg1: tensor<12xi8>, %arg2: tensor<f32>) -> (tensor<12xi8> {jax.result_info = "result[0]"}, tensor<f32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.convert %arg0 : (tensor<12xi32>) -> tensor<12xi8>
    %1 = stablehlo.and %0, %arg1 : tensor<12xi8>
    %2 = stablehlo.multiply %arg0, %arg0 : tensor<12xi32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %3 = stablehlo.reduce(%2 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<12xi32>, tensor<i32>) -> tensor<i32>
    %4 = stablehlo.convert %3 : (tensor<i32>) -> tensor<f32>
    %5 = stablehlo.multiply %4, %arg2 : tensor<f32>
    return %1, %5 : tensor<12xi8>, tensor<f32>
  }
}
