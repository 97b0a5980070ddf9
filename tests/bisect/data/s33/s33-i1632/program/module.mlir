module @jit_program attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]> {stablehlo.mesh = {axes = [{name = "x", size = 2 : i64}, {name = "y", size = 2 : i64}]}}
  func.func public @main(%arg0: tensor<16x5x32xi1> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {}]>}, %arg1: tensor<16xui8> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}]>}, %arg2: tensor<16xui8> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}]>}, %arg3: tensor<10x5x32xi1> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}, {}]>}, %arg4: tensor<16x5x3x32xi1> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}, {}, {"x"}]>}, %arg5: tensor<i32> {sdy.sharding = #sdy.sharding<@mesh, []>}, %arg6: tensor<i32> {sdy.sharding = #sdy.sharding<@mesh, []>}, %arg7: tensor<i32> {sdy.sharding = #sdy.sharding<@mesh, []>}, %arg8: tensor<i32> {sdy.sharding = #sdy.sharding<@mesh, []>}, %arg9: tensor<i32> {sdy.sharding = #sdy.sharding<@mesh, []>}, %arg10: tensor<i32> {sdy.sharding = #sdy.sharding<@mesh, []>}) -> (tensor<32x5x31xui8> {jax.result_info = "result[0]", sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}, {}]>}, tensor<16x5x3x32xi1> {jax.result_info = "result[1]", sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {}, {}]>}, tensor<2x3x2x1xi1> {jax.result_info = "result[2]", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}, {}]>}, tensor<30x6x3x3xi1> {jax.result_info = "result[3]", sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {}, {}]>}) {
    %c = stablehlo.constant dense<[6, 10, 0, 11, 2, 12, 4, 14, 8, 3]> : tensor<10xi32>
    %0 = stablehlo.select %arg0, %arg0, %arg0 : tensor<16x5x32xi1>, tensor<16x5x32xi1>
    %c_0 = stablehlo.constant dense<true> : tensor<i1>
    %1 = stablehlo.pad %arg0, %c_0, low = [2, 0, -1], high = [-1, 0, 0], interior = [1, 0, 0] : (tensor<16x5x32xi1>, tensor<i1>) -> tensor<32x5x31xi1>
    %c_1 = stablehlo.constant dense<1> : tensor<ui8>
    %2 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<ui8>) -> tensor<16xui8>
    %3 = stablehlo.maximum %arg2, %2 : tensor<16xui8>
    %4 = stablehlo.remainder %arg1, %3 : tensor<16xui8>
    %5 = stablehlo.shift_right_arithmetic %4, %arg1 : tensor<16xui8>
    %6 = stablehlo.reshape %c : (tensor<10xi32>) -> tensor<10x1xi32>
    %7 = "stablehlo.scatter"(%arg0, %6, %arg3) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1, 2], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = true}> ({
    ^bb0(%arg11: tensor<i1>, %arg12: tensor<i1>):
      stablehlo.return %arg12 : tensor<i1>
    }) : (tensor<16x5x32xi1>, tensor<10x1xi32>, tensor<10x5x32xi1>) -> tensor<16x5x32xi1>
    %c_2 = stablehlo.constant dense<255> : tensor<ui8>
    %8 = stablehlo.reduce(%5 init: %c_2) applies stablehlo.minimum across dimensions = [0] : (tensor<16xui8>, tensor<ui8>) -> tensor<ui8>
    %9 = stablehlo.iota dim = 0 : tensor<3xi32>
    %c_3 = stablehlo.constant dense<0> : tensor<i64>
    %10:3 = stablehlo.while(%iterArg = %9, %iterArg_14 = %c_3, %iterArg_15 = %arg3) : tensor<3xi32>, tensor<i64>, tensor<10x5x32xi1>
    cond {
      %c_16 = stablehlo.constant dense<3> : tensor<i64>
      %36 = stablehlo.compare LT, %iterArg_14, %c_16, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %36 : tensor<i1>
    } do {
      %36 = func.call @dynamic_index_in_dim(%iterArg, %iterArg_14) : (tensor<3xi32>, tensor<i64>) -> tensor<i32>
      %37 = func.call @closed_call(%iterArg_15, %36) : (tensor<10x5x32xi1>, tensor<i32>) -> tensor<10x5x32xi1>
      %c_16 = stablehlo.constant dense<1> : tensor<i64>
      %38 = stablehlo.add %iterArg_14, %c_16 : tensor<i64>
      stablehlo.return %iterArg, %38, %37 : tensor<3xi32>, tensor<i64>, tensor<10x5x32xi1>
    }
    %c_4 = stablehlo.constant dense<0> : tensor<i32>
    %11:2 = stablehlo.while(%iterArg = %c_4, %iterArg_14 = %1) : tensor<i32>, tensor<32x5x31xi1>
    cond {
      %c_15 = stablehlo.constant dense<4> : tensor<i32>
      %36 = stablehlo.compare LT, %iterArg, %c_15, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %36 : tensor<i1>
    } do {
      %c_15 = stablehlo.constant dense<1> : tensor<i32>
      %36 = stablehlo.add %iterArg, %c_15 : tensor<i32>
      %37 = stablehlo.not %iterArg_14 : tensor<32x5x31xi1>
      stablehlo.return %36, %37 : tensor<i32>, tensor<32x5x31xi1>
    }
    %12 = stablehlo.broadcast_in_dim %7, dims = [0, 1, 3] : (tensor<16x5x32xi1>) -> tensor<16x5x3x32xi1>
    %13 = stablehlo.convert %11#1 : (tensor<32x5x31xi1>) -> tensor<32x5x31xui8>
    %14 = stablehlo.select %arg4, %12, %12 : tensor<16x5x3x32xi1>, tensor<16x5x3x32xi1>
    %c_5 = stablehlo.constant dense<0> : tensor<i32>
    %15 = stablehlo.compare LT, %arg5, %c_5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_6 = stablehlo.constant dense<16> : tensor<i32>
    %16 = stablehlo.add %arg5, %c_6 : tensor<i32>
    %17 = stablehlo.select %15, %16, %arg5 : tensor<i1>, tensor<i32>
    %c_7 = stablehlo.constant dense<0> : tensor<i32>
    %18 = stablehlo.compare LT, %arg6, %c_7, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_8 = stablehlo.constant dense<5> : tensor<i32>
    %19 = stablehlo.add %arg6, %c_8 : tensor<i32>
    %20 = stablehlo.select %18, %19, %arg6 : tensor<i1>, tensor<i32>
    %c_9 = stablehlo.constant dense<0> : tensor<i32>
    %21 = stablehlo.compare LT, %arg7, %c_9, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_10 = stablehlo.constant dense<3> : tensor<i32>
    %22 = stablehlo.add %arg7, %c_10 : tensor<i32>
    %23 = stablehlo.select %21, %22, %arg7 : tensor<i1>, tensor<i32>
    %c_11 = stablehlo.constant dense<0> : tensor<i32>
    %24 = stablehlo.compare LT, %arg8, %c_11, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_12 = stablehlo.constant dense<32> : tensor<i32>
    %25 = stablehlo.add %arg8, %c_12 : tensor<i32>
    %26 = stablehlo.select %24, %25, %arg8 : tensor<i1>, tensor<i32>
    %27 = stablehlo.dynamic_slice %12, %17, %20, %23, %26, sizes = [14, 3, 2, 1] : (tensor<16x5x3x32xi1>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<14x3x2x1xi1>
    %28 = stablehlo.convert %arg9 : (tensor<i32>) -> tensor<i16>
    %29 = stablehlo.convert %arg6 : (tensor<i32>) -> tensor<i16>
    %30 = stablehlo.convert %arg7 : (tensor<i32>) -> tensor<i16>
    %31 = stablehlo.convert %arg10 : (tensor<i32>) -> tensor<i16>
    %32 = stablehlo.dynamic_slice %27, %28, %29, %30, %31, sizes = [2, 3, 2, 1] : (tensor<14x3x2x1xi1>, tensor<i16>, tensor<i16>, tensor<i16>, tensor<i16>) -> tensor<2x3x2x1xi1>
    %33 = sdy.manual_computation(%32) in_shardings=[<@mesh, [{"y"}, {}, {}, {}]>] out_shardings=[<@mesh, [{"y"}, {}, {}, {}]>] manual_axes={"x", "y"} (%arg11: tensor<1x3x2x1xi1>) {
      %36 = "stablehlo.collective_permute"(%arg11) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 1], [1, 0], [2, 3], [3, 2]]> : tensor<4x2xi64>}> : (tensor<1x3x2x1xi1>) -> tensor<1x3x2x1xi1>
      %37 = "stablehlo.collective_permute"(%36) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[1, 0], [0, 1], [3, 2], [2, 3]]> : tensor<4x2xi64>}> : (tensor<1x3x2x1xi1>) -> tensor<1x3x2x1xi1>
      sdy.return %37 : tensor<1x3x2x1xi1>
    } : (tensor<2x3x2x1xi1>) -> tensor<2x3x2x1xi1>
    %c_13 = stablehlo.constant dense<true> : tensor<i1>
    %34 = stablehlo.pad %27, %c_13, low = [2, -1, 0, 0], high = [1, 2, 1, 2], interior = [1, 1, 0, 0] : (tensor<14x3x2x1xi1>, tensor<i1>) -> tensor<30x6x3x3xi1>
    %35 = sdy.manual_computation(%34) in_shardings=[<@mesh, [{}, {"y"}, {}, {}]>] out_shardings=[<@mesh, [{"y"}, {}, {}, {}]>] manual_axes={"x", "y"} (%arg11: tensor<30x3x3x3xi1>) {
      %36 = "stablehlo.all_to_all"(%arg11) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 1 : i64, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<30x3x3x3xi1>) -> tensor<15x6x3x3xi1>
      sdy.return %36 : tensor<15x6x3x3xi1>
    } : (tensor<30x6x3x3xi1>) -> tensor<30x6x3x3xi1>
    return %13, %14, %33, %35 : tensor<32x5x31xui8>, tensor<16x5x3x32xi1>, tensor<2x3x2x1xi1>, tensor<30x6x3x3xi1>
  }
  func.func private @dynamic_index_in_dim(%arg0: tensor<3xi32>, %arg1: tensor<i64>) -> tensor<i32> {
    %0 = stablehlo.dynamic_slice %arg0, %arg1, sizes = [1] : (tensor<3xi32>, tensor<i64>) -> tensor<1xi32>
    %1 = stablehlo.reshape %0 : (tensor<1xi32>) -> tensor<i32>
    return %1 : tensor<i32>
  }
  func.func private @closed_call(%arg0: tensor<10x5x32xi1>, %arg1: tensor<i32>) -> tensor<10x5x32xi1> {
    %0 = stablehlo.slice %arg0 [0:1, 0:5, 0:32] : (tensor<10x5x32xi1>) -> tensor<1x5x32xi1>
    %1 = stablehlo.slice %arg0 [0:9, 0:5, 0:32] : (tensor<10x5x32xi1>) -> tensor<9x5x32xi1>
    %c = stablehlo.constant dense<1> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<1xi32>
    %3 = "stablehlo.scatter"(%arg0, %2, %1) <{indices_are_sorted = true, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0, 1, 2], scatter_dims_to_operand_dims = [0]>, unique_indices = true}> ({
    ^bb0(%arg2: tensor<i1>, %arg3: tensor<i1>):
      stablehlo.return %arg3 : tensor<i1>
    }) : (tensor<10x5x32xi1>, tensor<1xi32>, tensor<9x5x32xi1>) -> tensor<10x5x32xi1>
    %4 = stablehlo.not %0 : tensor<1x5x32xi1>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<1xi32>
    %6 = "stablehlo.scatter"(%3, %5, %4) <{indices_are_sorted = true, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0, 1, 2], scatter_dims_to_operand_dims = [0]>, unique_indices = true}> ({
    ^bb0(%arg2: tensor<i1>, %arg3: tensor<i1>):
      stablehlo.return %arg3 : tensor<i1>
    }) : (tensor<10x5x32xi1>, tensor<1xi32>, tensor<1x5x32xi1>) -> tensor<10x5x32xi1>
    return %6 : tensor<10x5x32xi1>
  }
}
